! diffusion_driver: ICON's horizontal diffusion driven from Fortran as ICON drives it, through the
! sciproxy_diffusion module (the C ABI): a generated global grid RnBk, init once with sciproxy's
! coefficients, then N dynamics steps (the first as ICON's initial call, linit) on the model's
! (nproma, nlev) arrays in place, then ICON's timer table and the time per call.
!
!   diffusion_driver [n k nlev nsteps [device [precision]]]
!     defaults: 2 4 65 6 auto double (R2B4, 65 levels, 6 steps); precision: double or single
!
! The configuration is ICON4Py's defaults with shear_type 2 (every branch, every output) and
! dtime = 9 s per km of grid spacing (dx ~ 5050 km / (n 2^k)), as ICON4Py's benchmark runs it.
! After the steps: one checksum line per field (its sum over the grid), to compare runs.
!
! Under mpiexec (where built with MPI's Fortran module: SCIPROXY_DRIVER_MPI), MPI_COMM_WORLD is
! the granule's communicator (options%comm): every rank passes the whole grid's fields and gets
! the whole result back; rank 0 prints. The checksums equal a run of one process bit for bit.
program diffusion_driver
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, output_unit
  use sciproxy, only: SCIPROXY_OK, sciproxy_last_error_message, sciproxy_c_string, &
                      sciproxy_version_string
  use sciproxy_diffusion
#ifdef SCIPROXY_DRIVER_MPI
  use mpi
#endif
  implicit none
  integer :: n, k, nlev, nsteps, step, level, status
  character(len=64) :: device, precision
  type(c_ptr) :: grid, diffusion
  type(sciproxy_diffusion_options) :: options
  type(sciproxy_diffusion_config) :: config
  type(sciproxy_diffusion_info) :: info
  integer(c_int32_t) :: nc, ne, nv
  real(c_double), allocatable, target :: vn(:, :), w(:, :), theta_v(:, :), exner(:, :), &
    rho(:, :), hdef_ic(:, :), div_ic(:, :), dwdx(:, :), dwdy(:, :)
  real(c_float), allocatable, target :: vn4(:, :), w4(:, :), theta4(:, :), exner4(:, :), &
    rho4(:, :), hdef4(:, :), div4(:, :), dwdx4(:, :), dwdy4(:, :)
  real(c_double), allocatable :: edge_lat(:), pnx(:), seconds(:)
  character(len=:), allocatable :: table
  real(c_double) :: dtime, dx_km, grid_seconds, init_seconds
  integer(int64) :: t0, t1, rate
  logical :: single, mpi_started
  integer :: rank
#ifdef SCIPROXY_DRIVER_MPI
  integer :: ierr
#endif

  rank = 0
  mpi_started = .false.
#ifdef SCIPROXY_DRIVER_MPI
  ! MPI only where a launcher started this process, as the library's MpiSession does.
  if (launched()) then
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    mpi_started = .true.
  end if
#endif

  n = int_argument(1, 2)
  k = int_argument(2, 4)
  nlev = int_argument(3, 65)
  nsteps = int_argument(4, 6)
  device = "auto"
  if (command_argument_count() >= 5) call get_command_argument(5, device)
  precision = "double"
  if (command_argument_count() >= 6) call get_command_argument(6, precision)
  if (precision /= "double" .and. precision /= "single") &
    call fail("precision: expected double or single, got "//trim(precision))
  single = precision == "single"
  if (nsteps < 1) call fail("nsteps: expected at least 1 step")
  if (n < 1 .or. k < 0) call fail("n, k: expected a grid RnBk with n >= 1, k >= 0")
  dx_km = 5050d0 / (n * 2d0**k)
  dtime = 9d0 * dx_km
  call system_clock(count_rate=rate)

  ! The grid.
  call system_clock(t0)
  status = sciproxy_diffusion_grid_icosahedral(n, k, grid)
  if (status /= SCIPROXY_OK) call fail(sciproxy_last_error_message())
  call system_clock(t1)
  grid_seconds = real(t1 - t0, c_double) / rate
  status = sciproxy_diffusion_grid_sizes(grid, nc, ne, nv)
  allocate (edge_lat(ne), pnx(ne))
  status = sciproxy_diffusion_grid_geometry(grid, edge_lat=edge_lat, primal_normal_x=pnx)
  if (status /= SCIPROXY_OK) call fail(sciproxy_last_error_message())

  ! init, once: sciproxy's coefficients, a simple vertical grid.
  call sciproxy_diffusion_options_default(options)
  options%device = sciproxy_c_string(trim(device))
  if (single) options%single_precision = 1
#ifdef SCIPROXY_DRIVER_MPI
  if (mpi_started) options%comm = int(MPI_COMM_WORLD, c_int64_t)
#endif
  call sciproxy_diffusion_config_default(config)
  config%shear_type = 2
  call system_clock(t0)
  status = sciproxy_diffusion_init_computed(grid, options, config, nlev, diffusion)
  if (status /= SCIPROXY_OK) call fail(sciproxy_last_error_message())
  call system_clock(t1)
  init_seconds = real(t1 - t0, c_double) / rate
  call sciproxy_diffusion_grid_free(grid)  ! the granule keeps its own copy
  status = sciproxy_diffusion_get_info(diffusion, info)

  ! The model's fields, (nproma, nlev): a zonal wind with noise, a stratified atmosphere.
  allocate (vn(ne, nlev), w(nc, nlev + 1), theta_v(nc, nlev), exner(nc, nlev), rho(nc, nlev), &
            hdef_ic(nc, nlev + 1), div_ic(nc, nlev + 1), dwdx(nc, nlev + 1), dwdy(nc, nlev + 1))
  call random_seed(put=[(4711 + level, level=1, 64)])
  call random_number(vn)
  call random_number(w)
  do level = 1, nlev
    vn(:, level) = 10d0 * cos(edge_lat) * pnx + 2d0 * (vn(:, level) - 0.5d0)
    theta_v(:, level) = 300d0 + 30d0 * real(nlev - level, c_double) / nlev
    exner(:, level) = 0.7d0 + 0.2d0 * real(level - 1, c_double) / nlev
  end do
  w = 0.1d0 * (w - 0.5d0)
  theta_v(1:nc:13, nlev) = theta_v(1:nc:13, nlev) - 8d0  ! cold pools
  rho = 1d0
  hdef_ic = 0
  div_ic = 0
  dwdx = 0
  dwdy = 0
  if (single) then
    vn4 = real(vn, c_float)
    w4 = real(w, c_float)
    theta4 = real(theta_v, c_float)
    exner4 = real(exner, c_float)
    rho4 = real(rho, c_float)
    hdef4 = real(hdef_ic, c_float)
    div4 = hdef4
    dwdx4 = hdef4
    dwdy4 = hdef4
  end if

  if (rank == 0) then
    print '(a, a)', "sciproxy ", sciproxy_version_string()
    print '(a, i0, a, i0, a, i0, a, i0, a, i0, a, i0, a)', "diffusion: R", n, "B", k, " (", nc, &
      " cells, ", ne, " edges, ", nv, " vertices) x ", nlev, " levels"
    print '(a, a, a, a, a, f0.1, a, f0.1, a, i0)', "device ", trim(device_name(info)), ", ", &
      trim(precision), " precision, dtime ", dtime, " s (dx ", dx_km, " km), shear_type ", &
      config%shear_type
    print '(a, f0.4, a, f0.4, a)', "grid ", grid_seconds, " s, init (coefficients + granule) ", &
      init_seconds, " s"
  end if

  ! The steps: ICON's initial call first, then the dynamics steps.
  allocate (seconds(nsteps))
  do step = 1, nsteps
    call system_clock(t0)
    if (single) then
      status = sciproxy_diffusion_run(diffusion, w4, vn4, exner4, theta4, hdef4, div4, dwdx4, &
                                      dwdy4, dtime, step == 1, rho4)
    else
      status = sciproxy_diffusion_run(diffusion, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, &
                                      dwdy, dtime, step == 1, rho)
    end if
    call system_clock(t1)
    if (status /= SCIPROXY_OK) call fail(sciproxy_last_error_message())
    seconds(step) = real(t1 - t0, c_double) / rate
    if (rank == 0) print '(a, i0, a, l1, a, f0.3, a)', "step ", step, " (linit ", step == 1, "): ", &
                        1d3 * seconds(step), " ms"
  end do

  status = sciproxy_diffusion_timer_table(diffusion, table)
  if (status /= SCIPROXY_OK) call fail(sciproxy_last_error_message())
  if (rank == 0) then
    write (output_unit, '(a)', advance='no') table
    print '(a, f0.3, a, i0, a)', "time per call: ", 1d3 * sum(seconds) / nsteps, " ms (", nsteps, &
      " calls)"
    if (nsteps > 1) print '(a, f0.3, a, f0.2, a)', "time per call after the first: ", &
      1d3 * sum(seconds(2:)) / (nsteps - 1), " ms, ", &
      info%bytes_per_run / (sum(seconds(2:)) / (nsteps - 1)) / 1d9, " GB/s (compulsory bytes)"
  end if
  if (single) then
    vn = real(vn4, c_double)
    w = real(w4, c_double)
    theta_v = real(theta4, c_double)
    exner = real(exner4, c_double)
    hdef_ic = real(hdef4, c_double)
    div_ic = real(div4, c_double)
    dwdx = real(dwdx4, c_double)
    dwdy = real(dwdy4, c_double)
  end if
  if (rank == 0) then
    call checksum("vn", vn)
    call checksum("w", w)
    call checksum("theta_v", theta_v)
    call checksum("exner", exner)
    call checksum("hdef_ic", hdef_ic)
    call checksum("div_ic", div_ic)
    call checksum("dwdx", dwdx)
    call checksum("dwdy", dwdy)
  end if
  call sciproxy_diffusion_free(diffusion)
  ! The main program's arrays are saved: freed here so that leak checkers see none.
  deallocate (vn, w, theta_v, exner, rho, hdef_ic, div_ic, dwdx, dwdy, edge_lat, pnx, seconds, table)
  if (single) deallocate (vn4, w4, theta4, exner4, rho4, hdef4, div4, dwdx4, dwdy4)
#ifdef SCIPROXY_DRIVER_MPI
  if (mpi_started) call MPI_Finalize(ierr)
#endif

contains

  subroutine checksum(name, x)
    character(len=*), intent(in) :: name
    real(c_double), intent(in) :: x(:, :)
    print '(a, a, a, es25.17)', "checksum ", name, " ", sum(x)
  end subroutine

#ifdef SCIPROXY_DRIVER_MPI
  ! Whether an MPI launcher (mpiexec, srun) started this process.
  logical function launched()
    integer :: length
    launched = .false.
    call get_environment_variable("OMPI_COMM_WORLD_SIZE", length=length)
    if (length > 0) launched = .true.
    call get_environment_variable("PMIX_RANK", length=length)
    if (length > 0) launched = .true.
    call get_environment_variable("PMI_RANK", length=length)
    if (length > 0) launched = .true.
    call get_environment_variable("PMI_SIZE", length=length)
    if (length > 0) launched = .true.
  end function
#endif

  integer function int_argument(position, default) result(value)
    integer, intent(in) :: position, default
    character(len=64) :: text
    integer :: ios
    value = default
    if (command_argument_count() < position) return
    call get_command_argument(position, text)
    read (text, *, iostat=ios) value
    if (ios /= 0) call fail("argument "//char(48 + position)//": expected an integer, got "// &
                            trim(text))
  end function

  function device_name(i) result(name)
    type(sciproxy_diffusion_info), intent(in) :: i
    character(len=32) :: name
    integer :: j
    name = ""
    do j = 1, size(i%device)
      if (i%device(j) == c_null_char) exit
      name(j:j) = i%device(j)
    end do
  end function

  subroutine fail(message)
    character(len=*), intent(in) :: message
    write (*, '(a, a)') "diffusion_driver: ", message
    stop 1, quiet=.true.
  end subroutine

end program
