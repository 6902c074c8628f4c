! The diffusion family from Fortran (module sciproxy_diffusion): a generated grid, init with
! sciproxy's coefficients, runs on the model's (nproma, nlev) arrays in place against the C++
! granule's LevelsContiguous run of the same fields (through the C-order layout), the physics
! (the noise on vn is damped), float32, the timer table, a grid from ICON's 1-based tables, and
! bad input (shapes, a non-contiguous section, dtime, NaN, a freed handle, unknown enum values,
! an unfilled config), each an error code with a message naming the argument.
program test_diffusion
  use, intrinsic :: iso_c_binding
  use sciproxy, only: SCIPROXY_OK, SCIPROXY_ERROR_INVALID_ARGUMENT, SCIPROXY_ERROR_TYPE, &
                      sciproxy_last_error_message, sciproxy_c_string
  use sciproxy_diffusion
  implicit none
  integer, parameter :: nlev = 6
  real(c_double), parameter :: dtime = 9d0 * 450d0
  type(c_ptr) :: grid, granule, c_order, single, tables, stale
  type(sciproxy_diffusion_options) :: options
  type(sciproxy_diffusion_config) :: config, unfilled
  type(sciproxy_diffusion_info) :: info
  integer(c_int32_t) :: nc, ne, nv
  real(c_double), allocatable, target :: vn(:, :), w(:, :), theta_v(:, :), exner(:, :), &
    hdef_ic(:, :), div_ic(:, :), dwdx(:, :), dwdy(:, :), rho(:, :), smooth(:, :)
  ! The same fields in C order, (level, entity) here: the C++ API's LevelsContiguous.
  real(c_double), allocatable, target :: vn_c(:, :), w_c(:, :), theta_c(:, :), exner_c(:, :), &
    hdef_c(:, :), div_c(:, :), dwdx_c(:, :), dwdy_c(:, :)
  real(c_float), allocatable, target :: vn4(:, :), w4(:, :), theta4(:, :), exner4(:, :), &
    d4(:, :, :)
  real(c_double), allocatable :: edge_lat(:), pnx(:), noise(:, :), wide(:, :)
  real(c_double) :: before, after, saved
  character(len=:), allocatable :: table
  integer :: status, failures, k
  logical :: first

  failures = 0

  ! The defaults and the grid.
  call sciproxy_diffusion_options_default(options)
  call sciproxy_diffusion_config_default(config)
  call check(options%struct_size > 0 .and. options%layout == SCIPROXY_DIFFUSION_FORTRAN_ORDER &
             .and. options%check_finite == 1 .and. options%single_precision == 0, "options")
  call check(config%struct_size > 0 .and. config%diffusion_type == 5 .and. &
             config%hdiff_efdt_ratio == 36d0 .and. config%ndyn_substeps == 5 .and. &
             config%shear_type == 0, "config defaults")
  call check(config%a_hshr == 1d0 .and. config%loutshs == 0 .and. &
             config%max_nudging_coefficient == 0.1d0 .and. &
             config%velocity_boundary_diffusion_denominator == 200d0, "config's last fields")
  ! The bind(c) types have the C structs' layout: their sizes are the library's struct_size.
  call check(c_sizeof(options) == options%struct_size, "options' size")
  call check(c_sizeof(config) == config%struct_size, "config's size")
  status = sciproxy_diffusion_grid_icosahedral(2, 1, grid)
  call check(status == SCIPROXY_OK, "grid")
  status = sciproxy_diffusion_grid_sizes(grid, nc, ne, nv)
  call check(status == SCIPROXY_OK .and. nc == 320 .and. ne == 480 .and. nv == 162, "sizes")
  allocate (edge_lat(ne), pnx(ne))
  status = sciproxy_diffusion_grid_geometry(grid, edge_lat=edge_lat, primal_normal_x=pnx)
  call check(status == SCIPROXY_OK, "geometry")

  ! Fields: a zonal wind with noise, a stratified theta_v with cold pools, small w.
  allocate (vn(ne, nlev), smooth(ne, nlev), noise(ne, nlev), w(nc, nlev + 1), &
            theta_v(nc, nlev), exner(nc, nlev), rho(nc, nlev))
  call random_seed(put=[(12345 + k, k=1, 64)])
  call random_number(noise)
  do k = 1, nlev
    smooth(:, k) = 10d0 * cos(edge_lat) * pnx
  end do
  vn = smooth + 2d0 * (noise - 0.5d0)
  call random_number(w)
  w = 0.1d0 * (w - 0.5d0)
  do k = 1, nlev
    theta_v(:, k) = 300d0 + 30d0 * (nlev - k) / nlev
    exner(:, k) = 0.7d0 + 0.2d0 * (k - 1) / nlev
  end do
  theta_v(1:nc:13, nlev - 1:nlev) = theta_v(1:nc:13, nlev - 1:nlev) - 8d0
  rho = 1d0
  allocate (hdef_ic(nc, nlev + 1), div_ic(nc, nlev + 1), dwdx(nc, nlev + 1), dwdy(nc, nlev + 1))
  hdef_ic = 0
  div_ic = 0
  dwdx = 0
  dwdy = 0
  vn_c = transpose(vn)
  w_c = transpose(w)
  theta_c = transpose(theta_v)
  exner_c = transpose(exner)
  hdef_c = transpose(hdef_ic)
  div_c = hdef_c
  dwdx_c = hdef_c
  dwdy_c = hdef_c
  vn4 = real(vn, c_float)
  w4 = real(w, c_float)
  theta4 = real(theta_v, c_float)
  exner4 = real(exner, c_float)
  allocate (d4(nc, nlev + 1, 4))
  d4 = 0

  ! Three granules: Fortran order, C order, float32.
  config%shear_type = 2
  options%device = sciproxy_c_string("cpu")
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, granule)
  call check(status == SCIPROXY_OK, "init_computed")
  options%layout = SCIPROXY_DIFFUSION_C_ORDER
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, c_order)
  call check(status == SCIPROXY_OK, "init_computed, C order")
  options%layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER
  options%single_precision = 1
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, single)
  call check(status == SCIPROXY_OK, "init_computed, float32")
  options%single_precision = 0
  status = sciproxy_diffusion_get_info(granule, info)
  call check(status == SCIPROXY_OK .and. info%num_cells == nc .and. info%num_levels == nlev, &
             "info")
  call check(sciproxy_diffusion_device(granule) == "cpu", "device")

  ! Two steps each (ICON's initial call, then a step).
  before = sum((vn - smooth)**2)
  do k = 1, 2
    first = k == 1
    status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                    dtime, first, rho)
    call check(status == SCIPROXY_OK, "run")
    ! The C-order granule runs the C++ API's LevelsContiguous layout on (level, entity) arrays:
    ! the shapes the Fortran wrapper checks are Fortran's, so it is called through the C-order
    ! arrays transposed back in shape only (the same memory, no copy).
    status = run_c_order(first)
    call check(status == SCIPROXY_OK, "run, C order")
    status = sciproxy_diffusion_run(single, w4, vn4, exner4, theta4, d4(:, :, 1), d4(:, :, 2), &
                                    d4(:, :, 3), d4(:, :, 4), dtime, first)
    call check(status == SCIPROXY_OK, "run, float32")
  end do
  call check(maxval(abs(vn - transpose(vn_c))) <= 1d-12 * maxval(abs(vn)), "vn as C++'s")
  call check(maxval(abs(w - transpose(w_c))) <= 1d-12 * maxval(abs(w)), "w as C++'s")
  call check(maxval(abs(theta_v - transpose(theta_c))) <= 1d-12 * maxval(abs(theta_v)), &
             "theta_v as C++'s")
  call check(maxval(abs(exner - transpose(exner_c))) <= 1d-12, "exner as C++'s")
  call check(maxval(abs(hdef_ic - transpose(hdef_c))) <= 1d-12 * maxval(abs(hdef_ic)), &
             "hdef_ic as C++'s")
  call check(maxval(abs(div_ic - transpose(div_c))) <= 1d-12 * maxval(abs(div_ic)), &
             "div_ic as C++'s")
  call check(maxval(abs(dwdx - transpose(dwdx_c))) <= 1d-12 * maxval(abs(dwdx)), "dwdx as C++'s")
  call check(maxval(abs(dwdy - transpose(dwdy_c))) <= 1d-12 * maxval(abs(dwdy)), "dwdy as C++'s")
  after = sum((vn - smooth)**2)
  call check(after < 0.9d0 * before, "the noise on vn is damped")
  call check(maxval(abs(hdef_ic)) > 0 .and. maxval(abs(dwdx)) > 0, "diagnostics written")
  call check(maxval(abs(vn4 - vn)) < 1d-3 .and. maxval(abs(theta4 - theta_v)) < 1d-2, &
             "float32 close to float64")
  print '(a, es10.3, a, es10.3)', " fortran diffusion: vn noise energy ", before, " -> ", after

  ! The timer table.
  status = sciproxy_diffusion_timer_table(granule, table)
  call check(status == SCIPROXY_OK .and. index(table, "# calls") > 0 .and. &
             index(table, "diffusion_run") > 0 .and. index(table, "init") > 0, "timer table")
  write (*, '(a)', advance='no') table

  ! Bad input to run, each named.
  status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  0d0, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "dtime", "dtime 0")
  status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  -dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "dtime", "dtime < 0")
  saved = theta_v(3, 2)
  theta_v(3, 2) = ieee_nan()
  status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "theta_v", "NaN in theta_v")
  theta_v(3, 2) = saved
  status = sciproxy_diffusion_run(granule, w, vn(:, 1:nlev - 1), exner, theta_v, hdef_ic, &
                                  div_ic, dwdx, dwdy, dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "vn: expected shape (480, 6)", &
                    "vn's shape")
  allocate (wide(2 * nc, nlev + 1))
  wide = 0
  status = sciproxy_diffusion_run(granule, wide(1:2 * nc:2, :), vn, exner, theta_v, hdef_ic, &
                                  div_ic, dwdx, dwdy, dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "w: expected a contiguous array", &
                    "a non-contiguous section")
  status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  dtime, .false., rho(:, 1:2))
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "rho", "rho's shape")
  status = sciproxy_diffusion_run(granule, w4, vn4, exner4, theta4, d4(:, :, 1), d4(:, :, 2), &
                                  d4(:, :, 3), d4(:, :, 4), dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_TYPE, "float64", "float32 fields, float64 granule")

  ! Bad input to init.
  options%layout = 3
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, stale)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "options.layout", "unknown layout")
  options%layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER
  status = sciproxy_diffusion_init_computed(grid, options, unfilled, nlev, stale)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "config.struct_size", &
                    "unfilled config")
  config%type_t_diffu = 9
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, stale)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "config.type_t_diffu", &
                    "unknown type_t_diffu")
  call sciproxy_diffusion_config_default(config)
  status = sciproxy_diffusion_init_computed(grid, options, config, 1, stale)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "num_levels", "one level")
  call check(.not. c_associated(stale), "no handle on error")
  call bad_init_shapes()

  ! A grid from ICON's tables (one triangle), and its shape and index checks.
  call tables_grid()

  ! Freed handles are refused by name; free sets the handle to null.
  stale = granule
  call sciproxy_diffusion_free(granule)
  call check(.not. c_associated(granule), "free nulls the handle")
  status = sciproxy_diffusion_run(stale, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "freed", "a freed handle")
  status = sciproxy_diffusion_run(granule, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, &
                                  dtime, .false.)
  call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "sciproxy_diffusion_init", &
                    "run before init")
  call sciproxy_diffusion_free(c_order)
  call sciproxy_diffusion_free(single)
  call sciproxy_diffusion_grid_free(grid)
  ! The main program's arrays are saved: freed here so that leak checkers see none.
  deallocate (vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy, rho, smooth, vn_c, w_c, &
              theta_c, exner_c, hdef_c, div_c, dwdx_c, dwdy_c, vn4, w4, theta4, exner4, d4, &
              edge_lat, pnx, noise, wide, table)

  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran diffusion: all checks passed"

contains

  ! The C-order granule on the (level, entity) arrays: its wrapper checks Fortran shapes
  ! (entity, level), so the arrays are handed over through pointers of that shape on the same
  ! memory.
  function run_c_order(linit) result(s)
    logical, intent(in) :: linit
    integer :: s
    real(c_double), pointer :: p_vn(:, :), p_w(:, :), p_th(:, :), p_ex(:, :), p_h(:, :), &
      p_d(:, :), p_x(:, :), p_y(:, :)
    call c_f_pointer(c_loc(vn_c), p_vn, [ne, nlev])
    call c_f_pointer(c_loc(w_c), p_w, [nc, nlev + 1])
    call c_f_pointer(c_loc(theta_c), p_th, [nc, nlev])
    call c_f_pointer(c_loc(exner_c), p_ex, [nc, nlev])
    call c_f_pointer(c_loc(hdef_c), p_h, [nc, nlev + 1])
    call c_f_pointer(c_loc(div_c), p_d, [nc, nlev + 1])
    call c_f_pointer(c_loc(dwdx_c), p_x, [nc, nlev + 1])
    call c_f_pointer(c_loc(dwdy_c), p_y, [nc, nlev + 1])
    s = sciproxy_diffusion_run(c_order, p_w, p_vn, p_ex, p_th, p_h, p_d, p_x, p_y, dtime, linit)
  end function

  ! init with ICON's arrays: every shape is checked before the library reads anything.
  subroutine bad_init_shapes()
    real(c_double), allocatable :: c1(:), c2(:, :), c3(:, :, :), e1(:), e4(:, :), v6(:, :), &
      c4(:, :), cl(:, :), ci(:, :), vct(:)
    integer(c_int32_t), allocatable :: off(:, :, :)
    type(c_ptr) :: h
    allocate (c1(nc), cl(nc, nlev), ci(nc, nlev + 1), c3(nc, 3, nlev), off(nc, 3, nlev), &
              c2(nc, 3), c4(nc, 4), e1(ne), e4(ne, 4), v6(nv, 6), vct(nlev + 1))
    c1 = 1; cl = 1; ci = 1; c3 = 0; off = 0; c2 = 0; c4 = 0; e1 = 1; e4 = 0; v6 = 0
    vct = [(1000d0 * (nlev - k), k=0, nlev)]
    status = sciproxy_diffusion_init(grid, vct, 1, cl, ci, c3, off, cl, c2, c2, c4, c4, c4, e1, &
                                     v6, v6, e1, e1, e1, e1, e1, e4, e4, e4, e4(:, 1:3), c1, &
                                     1d0, h)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, &
                      "dual_normal_vert_y: expected shape (480, 4), got (480, 3)", "init shape")
    status = sciproxy_diffusion_init(grid, vct(1:nlev), 1, cl, ci, c3, off, cl, c2, c2, c4, c4, &
                                     c4, e1, v6, v6, e1, e1, e1, e1, e1, e4, e4, e4, e4, c1, 1d0, h)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "vct_a: expected shape (7)", &
                      "vct_a's length")
    ! Shapes right, values checked by the library: the damping layer's end beyond the levels.
    status = sciproxy_diffusion_init(grid, vct, nlev, cl, ci, c3, off, cl, c2, c2, c4, c4, c4, e1, &
                                     v6, v6, e1, e1, e1, e1, e1, e4, e4, e4, e4, c1, 1d0, h)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "end_index_of_damping_layer", &
                      "damping layer")
    call check(.not. c_associated(h), "no handle from a failed init")
  end subroutine

  subroutine tables_grid()
    integer(c_int32_t) :: c2e(1, 3), c2e2c(1, 3), c2v(1, 3), e2c(3, 2), e2v(3, 2), e2c2v(3, 4), &
      v2e(3, 6), v2c(3, 6)
    c2e(1, :) = [1, 2, 3]
    c2e2c = 0
    c2v(1, :) = [1, 2, 3]
    e2c(:, 1) = 1
    e2c(:, 2) = 0
    e2v(:, 1) = [2, 1, 1]
    e2v(:, 2) = [3, 3, 2]
    e2c2v(:, 1:2) = e2v
    e2c2v(:, 3) = [1, 2, 3]
    e2c2v(:, 4) = 0
    v2e = 0
    v2c = 0
    status = sciproxy_diffusion_grid_init(c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, tables)
    call check(status == SCIPROXY_OK, "grid from tables")
    status = sciproxy_diffusion_init_computed(tables, options, config, nlev, stale)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "grid", "no geometry")
    call sciproxy_diffusion_grid_free(tables)
    call check(.not. c_associated(tables), "grid_free nulls the handle")
    status = sciproxy_diffusion_grid_init(c2e, c2e2c(:, 1:2), e2c, e2v, e2c2v, v2e, v2c, c2v, &
                                          tables)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, &
                      "c2e2c: expected shape (1, 3), got (1, 2)", "c2e2c's shape")
    e2c2v(2, 3) = 7
    status = sciproxy_diffusion_grid_init(c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, tables)
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "e2c2v", "an index out of range")
    call expect_error(status, SCIPROXY_ERROR_INVALID_ARGUMENT, "7 at (2, 3)", "its position")
  end subroutine

  function ieee_nan() result(x)
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    real(c_double) :: x
    x = ieee_value(x, ieee_quiet_nan)
  end function

  subroutine expect_error(got, code, text, what)
    integer, intent(in) :: got, code
    character(len=*), intent(in) :: text, what
    call check(got == code .and. index(sciproxy_last_error_message(), text) > 0, what)
  end subroutine

  subroutine check(condition, what)
    logical, intent(in) :: condition
    character(len=*), intent(in) :: what
    if (.not. condition) then
      print *, "check failed: ", what, " (last error: ", sciproxy_last_error_message(), ")"
      failures = failures + 1
    end if
  end subroutine

end program
