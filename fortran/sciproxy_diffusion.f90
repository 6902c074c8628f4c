! sciproxy_diffusion Fortran module: ICON's horizontal diffusion granule over the C ABI
! (include/sciproxy/c/diffusion.h) with iso_c_binding, as ICON calls it: a grid, init once, run
! every dynamics step on the model's own arrays.
!
!   use sciproxy, only: SCIPROXY_OK, sciproxy_last_error_message
!   use sciproxy_diffusion
!   type(c_ptr) :: grid, diffusion
!   status = sciproxy_diffusion_grid_icosahedral(2, 4, grid)         ! or _grid_init(ICON's tables)
!   status = sciproxy_diffusion_init_computed(grid, options, config, nlev, diffusion)
!                                                          ! or _init(grid, ICON's fields, ...)
!   status = sciproxy_diffusion_run(diffusion, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, &
!                                   dwdy, dtime, linit, rho)
!   status = sciproxy_diffusion_timer_table(diffusion, table)
!   call sciproxy_diffusion_free(diffusion); call sciproxy_diffusion_grid_free(grid)
!
! Arrays are ICON's, one block (nproma = the number of cells, edges or vertices): w(nc, nlev + 1),
! vn(ne, nlev), theta_ref_mc(nc, nlev), geofac_div(nc, 3), zd_intcoef(nc, 3, nlev), c2e(nc, 3)
! of 1-based indices, ... (the shapes of every argument: c/diffusion.h). The wrappers check every
! shape (an error names the argument, as the library's own errors do) and pass each array by its
! address: init's inputs are converted once by the library; run's fields are updated in place,
! WITHOUT copies. So run's fields must be contiguous (whole arrays, or contiguous sections such as
! a(:, :, jb)): a non-contiguous section is refused (SCIPROXY_ERROR_INVALID_ARGUMENT), never copied.
! Handles are type(c_ptr); the free routines set them to c_null_ptr, and a freed handle passed
! to any function is refused by name. status /= SCIPROXY_OK: sciproxy_last_error_message() says why.
module sciproxy_diffusion
  use, intrinsic :: iso_c_binding
  use sciproxy, only: SCIPROXY_OK, sciproxy_agree_status
  implicit none
  private

  ! sciproxy_diffusion_layout: how run's fields lie in memory (options%layout).
  integer(c_int32_t), parameter, public :: SCIPROXY_DIFFUSION_FORTRAN_ORDER = 0, &
    SCIPROXY_DIFFUSION_C_ORDER = 1

  ! Fill with sciproxy_diffusion_options_default (sets struct_size), then change fields; the
  ! device is a C string: options%device = sciproxy_c_string("cpu").
  type, bind(c), public :: sciproxy_diffusion_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int32_t) :: nparallel = 0, layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER
    integer(c_int32_t) :: single_precision = 0, check_finite = 1
    ! MPI: the communicator's handle (comm%MPI_VAL with mpi_f08; -1: this process alone), the
    ! rank (0-based) of every cell of the grid (c_loc of a num_cells array; c_null_ptr: METIS),
    ! and non-zero for each rank's own fields (sciproxy_diffusion_local_entities).
    integer(c_int64_t) :: comm = -1_c_int64_t
    type(c_ptr) :: cell_owner = c_null_ptr
    integer(c_int32_t) :: rank_local_fields = 0
    ! ICON's own decomposition: c_loc of a sciproxy_diffusion_local_decomposition (the grid and
    ! init's inputs are then this rank's local patch); c_null_ptr: a global grid on every rank.
    type(c_ptr) :: local_decomposition = c_null_ptr
  end type

  ! ICON's own decomposition (c/diffusion.h): per local entity of the patch, c_loc of its
  ! global index (1-based, decomp_info%glb_index), its owner rank (0-based) and its halo level
  ! (0 owned, then 1, 2, and 3 for edges, in order; decomp_info%halo_level), integer(c_int32_t)
  ! arrays of the patch's num_cells, num_edges and num_vertices values.
  type, bind(c), public :: sciproxy_diffusion_local_decomposition
    type(c_ptr) :: cell_global_index = c_null_ptr, edge_global_index = c_null_ptr, &
      vertex_global_index = c_null_ptr
    type(c_ptr) :: cell_owner = c_null_ptr, edge_owner = c_null_ptr, vertex_owner = c_null_ptr
    type(c_ptr) :: cell_halo_level = c_null_ptr, edge_halo_level = c_null_ptr, &
      vertex_halo_level = c_null_ptr
  end type

  ! ICON4Py's DiffusionConfig (flags as integers, non-zero true). Fill it with
  ! sciproxy_diffusion_config_default (the defaults, and struct_size): an unfilled one (struct_size
  ! 0) is refused, naming config.struct_size.
  type, bind(c), public :: sciproxy_diffusion_config
    integer(c_size_t) :: struct_size = 0
    integer(c_int32_t) :: diffusion_type, apply_to_vertical_wind, apply_to_horizontal_wind, &
      apply_to_temperature, apply_smag_diff_to_vertical_wind, compute_3d_smag_coeff, &
      type_vn_diffu, type_t_diffu
    real(c_double) :: hdiff_efdt_ratio, hdiff_w_efdt_ratio
    real(c_double) :: smagorinski_scaling_factor, smagorinski_scaling_factor2, &
      smagorinski_scaling_factor3, smagorinski_scaling_factor4
    real(c_double) :: smagorinski_scaling_height, smagorinski_scaling_height2, &
      smagorinski_scaling_height3, smagorinski_scaling_height4
    integer(c_int32_t) :: apply_zdiffusion_t, ndyn_substeps
    real(c_double) :: temperature_boundary_diffusion_denominator, &
      velocity_boundary_diffusion_denominator, max_nudging_coefficient
    integer(c_int32_t) :: shear_type, iforcing
    real(c_double) :: a_hshr
    integer(c_int32_t) :: loutshs
  end type

  type, bind(c), public :: sciproxy_diffusion_info
    integer(c_int32_t) :: num_cells = 0, num_edges = 0, num_vertices = 0, num_levels = 0
    integer(c_int32_t) :: single_precision = 0
    real(c_double) :: init_seconds = 0, bytes_per_run = 0
    character(kind=c_char) :: device(32) = c_null_char  ! NUL-terminated
  end type

  public :: sciproxy_diffusion_grid_icosahedral, sciproxy_diffusion_grid_init, &
            sciproxy_diffusion_grid_sizes, sciproxy_diffusion_grid_geometry, &
            sciproxy_diffusion_grid_free, sciproxy_diffusion_options_default, &
            sciproxy_diffusion_config_default, sciproxy_diffusion_init, &
            sciproxy_diffusion_init_computed, sciproxy_diffusion_run, &
            sciproxy_diffusion_get_info, sciproxy_diffusion_device, &
            sciproxy_diffusion_timer_table, sciproxy_diffusion_free, &
            sciproxy_diffusion_local_entities

  ! run on float64 (ICON's wp) or float32 fields; the granule's precision is its init's
  ! (options%single_precision). dtime is real(c_double) in both.
  interface sciproxy_diffusion_run
    module procedure run_f64, run_f32
  end interface

  interface
    ! ---- the C functions used as they are ----
    function sciproxy_diffusion_grid_icosahedral(n, k, grid) bind(C) result(status)
      import :: c_int, c_int32_t, c_ptr
      integer(c_int32_t), value :: n, k
      type(c_ptr), intent(out) :: grid
      integer(c_int) :: status
    end function
    function sciproxy_diffusion_grid_sizes(grid, num_cells, num_edges, num_vertices) bind(C) &
        result(status)
      import :: c_int, c_int32_t, c_ptr
      type(c_ptr), value :: grid
      integer(c_int32_t), intent(out), optional :: num_cells, num_edges, num_vertices
      integer(c_int) :: status
    end function
    ! Radians: cell_lat, cell_lon (nc), edge_lat, edge_lon, primal_normal_x/y (ne); a generated grid.
    function sciproxy_diffusion_grid_geometry(grid, cell_lat, cell_lon, edge_lat, edge_lon, &
                                              primal_normal_x, primal_normal_y) bind(C) &
        result(status)
      import :: c_int, c_double, c_ptr
      type(c_ptr), value :: grid
      real(c_double), intent(out), optional :: cell_lat(*), cell_lon(*), edge_lat(*), &
        edge_lon(*), primal_normal_x(*), primal_normal_y(*)
      integer(c_int) :: status
    end function
    subroutine sciproxy_diffusion_options_default(options) bind(C)
      import :: sciproxy_diffusion_options
      type(sciproxy_diffusion_options), intent(out) :: options
    end subroutine
    subroutine sciproxy_diffusion_config_default(config) bind(C)
      import :: sciproxy_diffusion_config
      type(sciproxy_diffusion_config), intent(out) :: config
    end subroutine
    ! Every coefficient computed by sciproxy from a generated grid (c/diffusion.h).
    function sciproxy_diffusion_init_computed(grid, options, config, num_levels, handle) &
        bind(C) result(status)
      import :: c_int, c_int32_t, c_ptr, sciproxy_diffusion_options, sciproxy_diffusion_config
      type(c_ptr), value :: grid
      type(sciproxy_diffusion_options), intent(in), optional :: options
      type(sciproxy_diffusion_config), intent(in), optional :: config
      integer(c_int32_t), value :: num_levels
      type(c_ptr), intent(out) :: handle
      integer(c_int) :: status
    end function
    function sciproxy_diffusion_get_info(handle, info) bind(C) result(status)
      import :: c_int, c_ptr, sciproxy_diffusion_info
      type(c_ptr), value :: handle
      type(sciproxy_diffusion_info), intent(out) :: info
      integer(c_int) :: status
    end function
    ! This rank's local entities of a dimension (0 cells, 1 edges, 2 vertices): their 1-based
    ! indices in the grid and halo levels (0: owned), owned first (c/diffusion.h).
    function sciproxy_diffusion_local_entities(handle, dimension, global_index, halo_level, &
                                               size, count) bind(C) result(status)
      import :: c_int, c_int32_t, c_ptr
      type(c_ptr), value :: handle
      integer(c_int32_t), value :: dimension, size
      integer(c_int32_t), intent(out), optional :: global_index(*), halo_level(*)
      integer(c_int32_t), intent(out), optional :: count
      integer(c_int) :: status
    end function

    ! ---- the C functions behind the wrappers below ----
    function c_grid_init(num_cells, num_edges, num_vertices, c2e, c2e2c, e2c, e2v, e2c2v, v2e, &
                         v2c, c2v, refin_c_ctrl, refin_e_ctrl, refin_v_ctrl, grid) &
        bind(C, name="sciproxy_diffusion_grid_init") result(status)
      import :: c_int, c_int32_t, c_ptr
      integer(c_int32_t), value :: num_cells, num_edges, num_vertices
      integer(c_int32_t), intent(in) :: c2e(*), c2e2c(*), e2c(*), e2v(*), e2c2v(*), v2e(*), &
        v2c(*), c2v(*)
      integer(c_int32_t), intent(in), optional :: refin_c_ctrl(*), refin_e_ctrl(*), &
        refin_v_ctrl(*)
      type(c_ptr), intent(out) :: grid
      integer(c_int) :: status
    end function
    subroutine c_grid_free(grid) bind(C, name="sciproxy_diffusion_grid_free")
      import :: c_ptr
      type(c_ptr), value :: grid
    end subroutine
    function c_init(grid, options, config, num_levels, vct_a, end_index_of_damping_layer, &
                    theta_ref_mc, wgtfac_c, zd_intcoef, zd_vertoffset, zd_diffcoef, e_bln_c_s, &
                    geofac_div, geofac_grg_x, geofac_grg_y, geofac_n2s, nudgecoeff_e, &
                    rbf_coeff_1, rbf_coeff_2, tangent_orientation, inverse_primal_edge_lengths, &
                    inverse_dual_edge_lengths, inverse_vertex_vertex_lengths, edge_areas, &
                    primal_normal_vert_x, primal_normal_vert_y, dual_normal_vert_x, &
                    dual_normal_vert_y, cell_area, mean_cell_area, handle) &
        bind(C, name="sciproxy_diffusion_init") result(status)
      import :: c_int, c_int32_t, c_double, c_ptr, sciproxy_diffusion_options, &
                sciproxy_diffusion_config
      type(c_ptr), value :: grid
      type(sciproxy_diffusion_options), intent(in), optional :: options
      type(sciproxy_diffusion_config), intent(in), optional :: config
      integer(c_int32_t), value :: num_levels, end_index_of_damping_layer
      real(c_double), intent(in) :: vct_a(*), theta_ref_mc(*), wgtfac_c(*), zd_intcoef(*)
      integer(c_int32_t), intent(in) :: zd_vertoffset(*)
      real(c_double), intent(in) :: zd_diffcoef(*), e_bln_c_s(*), geofac_div(*), &
        geofac_grg_x(*), geofac_grg_y(*), geofac_n2s(*), nudgecoeff_e(*), rbf_coeff_1(*), &
        rbf_coeff_2(*), tangent_orientation(*), inverse_primal_edge_lengths(*), &
        inverse_dual_edge_lengths(*), inverse_vertex_vertex_lengths(*), edge_areas(*), &
        primal_normal_vert_x(*), primal_normal_vert_y(*), dual_normal_vert_x(*), &
        dual_normal_vert_y(*), cell_area(*)
      real(c_double), value :: mean_cell_area
      type(c_ptr), intent(out) :: handle
      integer(c_int) :: status
    end function
    ! The fields by address (type(c_ptr), value): no copy-in, no copy-out.
    function c_run(handle, w, vn, exner, theta_v, rho, hdef_ic, div_ic, dwdx, dwdy, dtime, &
                   linit) bind(C, name="sciproxy_diffusion_run") result(status)
      import :: c_int, c_int32_t, c_double, c_ptr
      type(c_ptr), value :: handle, w, vn, exner, theta_v, rho, hdef_ic, div_ic, dwdx, dwdy
      real(c_double), value :: dtime
      integer(c_int32_t), value :: linit
      integer(c_int) :: status
    end function
    function c_run_f32(handle, w, vn, exner, theta_v, rho, hdef_ic, div_ic, dwdx, dwdy, dtime, &
                       linit) bind(C, name="sciproxy_diffusion_run_f32") result(status)
      import :: c_int, c_int32_t, c_double, c_ptr
      type(c_ptr), value :: handle, w, vn, exner, theta_v, rho, hdef_ic, div_ic, dwdx, dwdy
      real(c_double), value :: dtime
      integer(c_int32_t), value :: linit
      integer(c_int) :: status
    end function
    function c_timer_table(handle, buffer, size, length) &
        bind(C, name="sciproxy_diffusion_timer_table") result(status)
      import :: c_int, c_char, c_size_t, c_ptr
      type(c_ptr), value :: handle
      character(kind=c_char), intent(out), optional :: buffer(*)
      integer(c_size_t), value :: size
      integer(c_size_t), intent(out), optional :: length
      integer(c_int) :: status
    end function
    subroutine c_free(handle) bind(C, name="sciproxy_diffusion_free")
      import :: c_ptr
      type(c_ptr), value :: handle
    end subroutine
    function c_agree_run(handle, local) bind(C, name="sciproxy_diffusion_agree_status") &
        result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), value :: local
      integer(c_int) :: status
    end function
    function c_check_array(argument, contiguous, rank, shape, expected) &
        bind(C, name="sciproxy_diffusion_check_array") result(status)
      import :: c_int, c_char, c_int32_t, c_int64_t
      character(kind=c_char), intent(in) :: argument(*)
      integer(c_int32_t), value :: contiguous, rank
      integer(c_int64_t), intent(in) :: shape(*), expected(*)
      integer(c_int) :: status
    end function
  end interface

contains

  ! SCIPROXY_OK when the array's shape is `expected` and it is contiguous; else the library's
  ! error naming it (so sciproxy_last_error_message() reports it like every other error).
  function check_shape(name, actual, expected, in_one_piece) result(status)
    character(len=*), intent(in) :: name
    integer, intent(in) :: actual(:)
    integer(c_int64_t), intent(in) :: expected(:)
    logical, intent(in), optional :: in_one_piece
    integer(c_int) :: status
    integer(c_int32_t) :: flag
    flag = 1
    if (present(in_one_piece)) then
      if (.not. in_one_piece) flag = 0
    end if
    status = c_check_array(trim(name)//c_null_char, flag, size(actual, kind=c_int32_t), &
                           int(actual, c_int64_t), expected)
  end function

  ! A grid from ICON's connectivity tables, 1-based, one block: c2e(nc, 3), c2e2c(nc, 3),
  ! e2c(ne, 2), e2v(ne, 2), e2c2v(ne, 4), v2e(nv, 6), v2c(nv, 6), c2v(nc, 3); nc, ne and nv are
  ! taken from c2e, e2c and v2e. refin_c_ctrl(nc), refin_e_ctrl(ne), refin_v_ctrl(nv) are optional
  ! (absent: a global grid). Indices <= 0 mark missing neighbours where ICON has them.
  function sciproxy_diffusion_grid_init(c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, grid, &
                                        refin_c_ctrl, refin_e_ctrl, refin_v_ctrl) result(status)
    integer(c_int32_t), intent(in), contiguous :: c2e(:, :), c2e2c(:, :), e2c(:, :), e2v(:, :), &
      e2c2v(:, :), v2e(:, :), v2c(:, :), c2v(:, :)
    type(c_ptr), intent(out) :: grid
    integer(c_int32_t), intent(in), contiguous, optional :: refin_c_ctrl(:), refin_e_ctrl(:), &
      refin_v_ctrl(:)
    integer(c_int) :: status
    integer(c_int64_t) :: nc, ne, nv
    grid = c_null_ptr
    nc = size(c2e, 1, kind=c_int64_t)
    ne = size(e2c, 1, kind=c_int64_t)
    nv = size(v2e, 1, kind=c_int64_t)
    status = check_shape("c2e", shape(c2e), [nc, 3_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("c2e2c", shape(c2e2c), [nc, 3_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("c2v", shape(c2v), [nc, 3_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("e2c", shape(e2c), [ne, 2_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("e2v", shape(e2v), [ne, 2_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("e2c2v", shape(e2c2v), [ne, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("v2e", shape(v2e), [nv, 6_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("v2c", shape(v2c), [nv, 6_c_int64_t])
    if (status == SCIPROXY_OK .and. present(refin_c_ctrl)) &
      status = check_shape("refin_c_ctrl", shape(refin_c_ctrl), [nc])
    if (status == SCIPROXY_OK .and. present(refin_e_ctrl)) &
      status = check_shape("refin_e_ctrl", shape(refin_e_ctrl), [ne])
    if (status == SCIPROXY_OK .and. present(refin_v_ctrl)) &
      status = check_shape("refin_v_ctrl", shape(refin_v_ctrl), [nv])
    if (status /= SCIPROXY_OK) return
    status = c_grid_init(int(nc, c_int32_t), int(ne, c_int32_t), int(nv, c_int32_t), c2e, c2e2c, &
                         e2c, e2v, e2c2v, v2e, v2c, c2v, refin_c_ctrl, refin_e_ctrl, refin_v_ctrl, &
                         grid)
  end function

  subroutine sciproxy_diffusion_grid_free(grid)
    type(c_ptr), intent(inout) :: grid
    call c_grid_free(grid)
    grid = c_null_ptr
  end subroutine

  subroutine sciproxy_diffusion_free(handle)
    type(c_ptr), intent(inout) :: handle
    call c_free(handle)
    handle = c_null_ptr
  end subroutine

  ! init with ICON's own fields (shapes: c/diffusion.h; nlev from theta_ref_mc, nc, ne, nv from
  ! the grid); end_index_of_damping_layer is ICON4Py's zero-based one (ICON's nrdmax - 1).
  function sciproxy_diffusion_init(grid, vct_a, end_index_of_damping_layer, theta_ref_mc, &
                                   wgtfac_c, zd_intcoef, zd_vertoffset, zd_diffcoef, e_bln_c_s, &
                                   geofac_div, geofac_grg_x, geofac_grg_y, geofac_n2s, &
                                   nudgecoeff_e, rbf_coeff_1, rbf_coeff_2, tangent_orientation, &
                                   inverse_primal_edge_lengths, inverse_dual_edge_lengths, &
                                   inverse_vertex_vertex_lengths, edge_areas, &
                                   primal_normal_vert_x, primal_normal_vert_y, &
                                   dual_normal_vert_x, dual_normal_vert_y, cell_area, &
                                   mean_cell_area, handle, options, config) result(status)
    type(c_ptr), intent(in) :: grid
    real(c_double), intent(in), contiguous :: vct_a(:), theta_ref_mc(:, :), wgtfac_c(:, :), &
      zd_intcoef(:, :, :), zd_diffcoef(:, :), e_bln_c_s(:, :), geofac_div(:, :), &
      geofac_grg_x(:, :), geofac_grg_y(:, :), geofac_n2s(:, :), nudgecoeff_e(:), &
      rbf_coeff_1(:, :), rbf_coeff_2(:, :), tangent_orientation(:), &
      inverse_primal_edge_lengths(:), inverse_dual_edge_lengths(:), &
      inverse_vertex_vertex_lengths(:), edge_areas(:), primal_normal_vert_x(:, :), &
      primal_normal_vert_y(:, :), dual_normal_vert_x(:, :), dual_normal_vert_y(:, :), cell_area(:)
    integer, intent(in) :: end_index_of_damping_layer
    integer(c_int32_t), intent(in), contiguous :: zd_vertoffset(:, :, :)
    real(c_double), intent(in) :: mean_cell_area
    type(c_ptr), intent(out) :: handle
    type(sciproxy_diffusion_options), intent(in), optional :: options
    type(sciproxy_diffusion_config), intent(in), optional :: config
    integer(c_int) :: status
    integer(c_int32_t) :: nc32, ne32, nv32
    integer(c_int64_t) :: nc, ne, nv, nlev
    handle = c_null_ptr
    nc32 = 0
    ne32 = 0
    nv32 = 0
    status = sciproxy_diffusion_grid_sizes(grid, nc32, ne32, nv32)
    nc = nc32
    ne = ne32
    nv = nv32
    nlev = size(theta_ref_mc, 2, kind=c_int64_t)
    if (status == SCIPROXY_OK) status = check_shape("vct_a", shape(vct_a), [nlev + 1])
    if (status == SCIPROXY_OK) status = check_shape("theta_ref_mc", shape(theta_ref_mc), [nc, nlev])
    if (status == SCIPROXY_OK) status = check_shape("wgtfac_c", shape(wgtfac_c), [nc, nlev + 1])
    if (status == SCIPROXY_OK) &
      status = check_shape("zd_intcoef", shape(zd_intcoef), [nc, 3_c_int64_t, nlev])
    if (status == SCIPROXY_OK) &
      status = check_shape("zd_vertoffset", shape(zd_vertoffset), [nc, 3_c_int64_t, nlev])
    if (status == SCIPROXY_OK) status = check_shape("zd_diffcoef", shape(zd_diffcoef), [nc, nlev])
    if (status == SCIPROXY_OK) status = check_shape("e_bln_c_s", shape(e_bln_c_s), [nc, 3_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("geofac_div", shape(geofac_div), [nc, 3_c_int64_t])
    if (status == SCIPROXY_OK) &
      status = check_shape("geofac_grg_x", shape(geofac_grg_x), [nc, 4_c_int64_t])
    if (status == SCIPROXY_OK) &
      status = check_shape("geofac_grg_y", shape(geofac_grg_y), [nc, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("geofac_n2s", shape(geofac_n2s), [nc, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("nudgecoeff_e", shape(nudgecoeff_e), [ne])
    if (status == SCIPROXY_OK) &
      status = check_shape("rbf_coeff_1", shape(rbf_coeff_1), [nv, 6_c_int64_t])
    if (status == SCIPROXY_OK) &
      status = check_shape("rbf_coeff_2", shape(rbf_coeff_2), [nv, 6_c_int64_t])
    if (status == SCIPROXY_OK) &
      status = check_shape("tangent_orientation", shape(tangent_orientation), [ne])
    if (status == SCIPROXY_OK) status = check_shape("inverse_primal_edge_lengths", &
                                                    shape(inverse_primal_edge_lengths), [ne])
    if (status == SCIPROXY_OK) status = check_shape("inverse_dual_edge_lengths", &
                                                    shape(inverse_dual_edge_lengths), [ne])
    if (status == SCIPROXY_OK) status = check_shape("inverse_vertex_vertex_lengths", &
                                                    shape(inverse_vertex_vertex_lengths), [ne])
    if (status == SCIPROXY_OK) status = check_shape("edge_areas", shape(edge_areas), [ne])
    if (status == SCIPROXY_OK) status = check_shape("primal_normal_vert_x", &
                                                    shape(primal_normal_vert_x), [ne, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("primal_normal_vert_y", &
                                                    shape(primal_normal_vert_y), [ne, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("dual_normal_vert_x", &
                                                    shape(dual_normal_vert_x), [ne, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("dual_normal_vert_y", &
                                                    shape(dual_normal_vert_y), [ne, 4_c_int64_t])
    if (status == SCIPROXY_OK) status = check_shape("cell_area", shape(cell_area), [nc])
    ! init is collective: a check failed on one rank fails every rank (none waits in init).
    if (present(options)) status = sciproxy_agree_status(options%comm, status)
    if (status /= SCIPROXY_OK) return
    status = c_init(grid, options, config, int(nlev, c_int32_t), vct_a, &
                    int(end_index_of_damping_layer, c_int32_t), theta_ref_mc, wgtfac_c, &
                    zd_intcoef, zd_vertoffset, zd_diffcoef, e_bln_c_s, geofac_div, geofac_grg_x, &
                    geofac_grg_y, geofac_n2s, nudgecoeff_e, rbf_coeff_1, rbf_coeff_2, &
                    tangent_orientation, inverse_primal_edge_lengths, inverse_dual_edge_lengths, &
                    inverse_vertex_vertex_lengths, edge_areas, primal_normal_vert_x, &
                    primal_normal_vert_y, dual_normal_vert_x, dual_normal_vert_y, cell_area, &
                    mean_cell_area, handle)
  end function

  ! The shapes run's fields must have: (nc, nlev + 1) for w and the diagnostics, (ne, nlev) for
  ! vn, (nc, nlev) for exner, theta_v and rho.
  function check_fields(handle, w_shape, w_contiguous, vn_shape, vn_contiguous, ex_shape, &
                        ex_contiguous, th_shape, th_contiguous, diagnostic_shapes, &
                        diagnostic_contiguous, rho_shape, rho_contiguous) result(status)
    type(c_ptr), intent(in) :: handle
    integer, intent(in) :: w_shape(2), vn_shape(2), ex_shape(2), th_shape(2), &
      diagnostic_shapes(2, 4)
    logical, intent(in) :: w_contiguous, vn_contiguous, ex_contiguous, th_contiguous, &
      diagnostic_contiguous(4)
    integer, intent(in), optional :: rho_shape(2)
    logical, intent(in), optional :: rho_contiguous
    integer(c_int) :: status
    type(sciproxy_diffusion_info) :: info
    integer(c_int64_t) :: nc, ne, nlev
    character(len=7), parameter :: names(4) = ["hdef_ic", "div_ic ", "dwdx   ", "dwdy   "]
    integer :: i
    status = sciproxy_diffusion_get_info(handle, info)
    if (status /= SCIPROXY_OK) return
    nc = info%num_cells
    ne = info%num_edges
    nlev = info%num_levels
    status = check_shape("w", w_shape, [nc, nlev + 1], w_contiguous)
    if (status == SCIPROXY_OK) status = check_shape("vn", vn_shape, [ne, nlev], vn_contiguous)
    if (status == SCIPROXY_OK) status = check_shape("exner", ex_shape, [nc, nlev], ex_contiguous)
    if (status == SCIPROXY_OK) status = check_shape("theta_v", th_shape, [nc, nlev], th_contiguous)
    do i = 1, 4
      if (status == SCIPROXY_OK) status = check_shape(names(i), diagnostic_shapes(:, i), &
                                                      [nc, nlev + 1], diagnostic_contiguous(i))
    end do
    if (status == SCIPROXY_OK .and. present(rho_shape)) &
      status = check_shape("rho", rho_shape, [nc, nlev], rho_contiguous)
  end function

  ! One diffusion step of dtime seconds on the model's float64 arrays, in place, without copies.
  ! linit: ICON's initial call. rho is accepted and unused (as in ICON4Py), and may be left out.
  function run_f64(handle, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, dtime, linit, &
                   rho) result(status)
    type(c_ptr), intent(in) :: handle
    real(c_double), intent(inout), target :: w(:, :), vn(:, :), exner(:, :), theta_v(:, :), &
      hdef_ic(:, :), div_ic(:, :), dwdx(:, :), dwdy(:, :)
    real(c_double), intent(in) :: dtime
    logical, intent(in) :: linit
    real(c_double), intent(in), target, optional :: rho(:, :)
    integer(c_int) :: status
    type(c_ptr) :: rho_address
    if (present(rho)) then
      status = check_fields(handle, shape(w), is_contiguous(w), shape(vn), is_contiguous(vn), &
                            shape(exner), is_contiguous(exner), shape(theta_v), &
                            is_contiguous(theta_v), reshape([shape(hdef_ic), shape(div_ic), &
                            shape(dwdx), shape(dwdy)], [2, 4]), [is_contiguous(hdef_ic), &
                            is_contiguous(div_ic), is_contiguous(dwdx), is_contiguous(dwdy)], &
                            shape(rho), is_contiguous(rho))
      rho_address = c_loc(rho)
    else
      status = check_fields(handle, shape(w), is_contiguous(w), shape(vn), is_contiguous(vn), &
                            shape(exner), is_contiguous(exner), shape(theta_v), &
                            is_contiguous(theta_v), reshape([shape(hdef_ic), shape(div_ic), &
                            shape(dwdx), shape(dwdy)], [2, 4]), [is_contiguous(hdef_ic), &
                            is_contiguous(div_ic), is_contiguous(dwdx), is_contiguous(dwdy)])
      rho_address = c_null_ptr
    end if
    ! run is collective: a check failed on one rank fails every rank (none waits in run).
    status = c_agree_run(handle, status)
    if (status /= SCIPROXY_OK) return
    status = c_run(handle, c_loc(w), c_loc(vn), c_loc(exner), c_loc(theta_v), rho_address, &
                   c_loc(hdef_ic), c_loc(div_ic), c_loc(dwdx), c_loc(dwdy), dtime, &
                   merge(1_c_int32_t, 0_c_int32_t, linit))
  end function

  ! The same on float32 arrays (a granule initialised with options%single_precision = 1).
  function run_f32(handle, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, dtime, linit, &
                   rho) result(status)
    type(c_ptr), intent(in) :: handle
    real(c_float), intent(inout), target :: w(:, :), vn(:, :), exner(:, :), theta_v(:, :), &
      hdef_ic(:, :), div_ic(:, :), dwdx(:, :), dwdy(:, :)
    real(c_double), intent(in) :: dtime
    logical, intent(in) :: linit
    real(c_float), intent(in), target, optional :: rho(:, :)
    integer(c_int) :: status
    type(c_ptr) :: rho_address
    if (present(rho)) then
      status = check_fields(handle, shape(w), is_contiguous(w), shape(vn), is_contiguous(vn), &
                            shape(exner), is_contiguous(exner), shape(theta_v), &
                            is_contiguous(theta_v), reshape([shape(hdef_ic), shape(div_ic), &
                            shape(dwdx), shape(dwdy)], [2, 4]), [is_contiguous(hdef_ic), &
                            is_contiguous(div_ic), is_contiguous(dwdx), is_contiguous(dwdy)], &
                            shape(rho), is_contiguous(rho))
      rho_address = c_loc(rho)
    else
      status = check_fields(handle, shape(w), is_contiguous(w), shape(vn), is_contiguous(vn), &
                            shape(exner), is_contiguous(exner), shape(theta_v), &
                            is_contiguous(theta_v), reshape([shape(hdef_ic), shape(div_ic), &
                            shape(dwdx), shape(dwdy)], [2, 4]), [is_contiguous(hdef_ic), &
                            is_contiguous(div_ic), is_contiguous(dwdx), is_contiguous(dwdy)])
      rho_address = c_null_ptr
    end if
    ! run is collective: a check failed on one rank fails every rank (none waits in run).
    status = c_agree_run(handle, status)
    if (status /= SCIPROXY_OK) return
    status = c_run_f32(handle, c_loc(w), c_loc(vn), c_loc(exner), c_loc(theta_v), rho_address, &
                       c_loc(hdef_ic), c_loc(div_ic), c_loc(dwdx), c_loc(dwdy), dtime, &
                       merge(1_c_int32_t, 0_c_int32_t, linit))
  end function

  ! ICON's timer table (name, # calls, t_min, t_avg, t_max, total) of init and every run so far.
  function sciproxy_diffusion_timer_table(handle, table) result(status)
    type(c_ptr), intent(in) :: handle
    character(len=:), allocatable, intent(out) :: table
    integer(c_int) :: status
    character(kind=c_char), allocatable :: buffer(:)
    integer(c_size_t) :: n
    integer :: i
    table = ""
    n = 0
    status = c_timer_table(handle, size=0_c_size_t, length=n)
    if (status /= SCIPROXY_OK) return
    allocate (buffer(n + 1))
    status = c_timer_table(handle, buffer, n + 1, n)
    if (status /= SCIPROXY_OK) return
    deallocate (table)
    allocate (character(len=n) :: table)
    do i = 1, int(n)
      table(i:i) = buffer(i)
    end do
  end function

  ! The backend a granule runs on ("cpu", "cuda:0"), "" for a bad handle.
  function sciproxy_diffusion_device(handle) result(name)
    type(c_ptr), intent(in) :: handle
    character(len=:), allocatable :: name
    type(sciproxy_diffusion_info) :: info
    integer :: n
    name = ""
    if (sciproxy_diffusion_get_info(handle, info) /= SCIPROXY_OK) return
    n = 0
    do while (n < size(info%device))
      if (info%device(n + 1) == c_null_char) exit
      n = n + 1
    end do
    deallocate (name)
    allocate (character(len=n) :: name)
    do n = 1, len(name)
      name(n:n) = info%device(n)
    end do
  end function

end module sciproxy_diffusion
