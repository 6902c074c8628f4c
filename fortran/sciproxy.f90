! sciproxy Fortran module: iso_c_binding over the C ABI (include/sciproxy/sciproxy.h, one header
! per family in include/sciproxy/c), every family, with the C headers' convention (c/core.h):
!   status = sciproxy_<kernel>_<dtype>(input, options, ..., outputs)
! - input: a bind(c) derived type mirroring the C input struct. Its arrays are type(c_ptr): set
!   them with c_loc of arrays that have the target attribute. One type serves both dtypes (the
!   layouts differ only in what the pointers point at): the function's _f32 / _f64 decides.
! - options: a bind(c) type mirroring the C options struct; fill it with
!   sciproxy_<kernel>_options_default(options) (which sets struct_size), then change fields. It is
!   optional: absent means every default. String fields (device, storage_directory) are C
!   pointers: set them with sciproxy_c_string("cpu").
! - Optional arguments are the C ABI's NULL pointers.
! - C's row-major [a, b, c] is Fortran's column-major (c, b, a): a C array
!   receiver_amplitudes [nshots, nreceivers, nt] is receiver_amplitudes(nt, nreceivers, nshots)
!   here, a model [shape(1), shape(2), shape(3)] is v(shape(3), shape(2), shape(1)).
! - status /= SCIPROXY_OK: sciproxy_last_error_message() says why.
! For traces of equal length in one array, sciproxy_parstack and sciproxy_parstack_window wrap
! the stack family's C functions.
module sciproxy
  use, intrinsic :: iso_c_binding
  implicit none
  private

  ! Status codes (sciproxy_status, c/core.h).
  integer(c_int), parameter, public :: SCIPROXY_OK = 0, SCIPROXY_ERROR_INVALID_ARGUMENT = 1, &
    SCIPROXY_ERROR_TYPE = 2, SCIPROXY_ERROR_NOT_COMPILED = 3, &
    SCIPROXY_ERROR_DEVICE_UNAVAILABLE = 4, SCIPROXY_ERROR_IO = 5, SCIPROXY_ERROR_RUNTIME = 6, &
    SCIPROXY_ERROR_CANCELLED = 7, SCIPROXY_ERROR_OUT_OF_MEMORY = 8
  ! sciproxy_storage_mode (c/wave.h) and sciproxy_tti_demo_form (c/tti.h).
  integer(c_int), parameter, public :: SCIPROXY_STORAGE_DEVICE = 0, SCIPROXY_STORAGE_HOST = 1, &
    SCIPROXY_STORAGE_DISK = 2, SCIPROXY_STORAGE_NONE = 3
  integer(c_int), parameter, public :: SCIPROXY_TTI_DEMO_TWO_PASS = 0, SCIPROXY_TTI_DEMO_FUSED = 1
  ! MPI (c/core.h): the comm field's "this process alone".
  integer(c_int64_t), parameter, public :: SCIPROXY_NO_COMM = -1

  ! ---- stack (c/stack.h) ----
  type, bind(c), public :: sciproxy_parstack_input
    type(c_ptr) :: traces = c_null_ptr   ! ntraces pointers, each to lengths(i) samples
    type(c_ptr) :: lengths = c_null_ptr  ! int64 (ntraces)
    integer(c_int64_t) :: ntraces = 0
    type(c_ptr) :: offsets = c_null_ptr  ! int32 (ntraces)
    type(c_ptr) :: shifts = c_null_ptr   ! int32 (ntraces, nshifts) in Fortran order
    type(c_ptr) :: weights = c_null_ptr  ! (ntraces, nshifts) in Fortran order
    integer(c_int64_t) :: nshifts = 0
  end type

  type, bind(c), public :: sciproxy_parstack_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int) :: method = 0
    integer(c_int32_t) :: offsetout = 0
    integer(c_int64_t) :: lengthout = -1
    integer(c_int) :: accumulate = 0, clamp_max_at_zero = 0, nparallel = 0
    integer(c_int) :: autotune = 0  ! cpu: the chunk chosen by timing (cached)
    ! MPI: the communicator's handle (MPI_COMM_WORLD, or comm%MPI_VAL with mpi_f08);
    ! SCIPROXY_NO_COMM: this process alone. Shift sets and result as in c/stack.h.
    integer(c_int64_t) :: comm = SCIPROXY_NO_COMM
    integer(c_int) :: shift_sets = 0, result_layout = 0
  end type

  type, bind(c), public :: sciproxy_argmax_input
    type(c_ptr) :: a = c_null_ptr  ! C [rows, cols]: Fortran a(cols, rows)
    integer(c_int64_t) :: rows = 0, cols = 0
  end type

  type, bind(c), public :: sciproxy_argmax_options
    integer(c_size_t) :: struct_size = 0
    integer(c_int) :: nparallel = 0, pyrocko_compat = 0
  end type

  ! ---- wave (c/wave.h) ----
  type, bind(c), public :: sciproxy_scalar_input
    integer(c_int) :: ndim = 0
    integer(c_int64_t) :: shape(3) = 1   ! C order: shape(1) is the slowest axis
    real(c_double) :: spacing(3) = 1
    type(c_ptr) :: v = c_null_ptr
    integer(c_int64_t) :: nmodels = 1
    real(c_double) :: dt = 0
    integer(c_int64_t) :: nt = 0, nshots = 1, nsources = 0, nreceivers = 0
    type(c_ptr) :: source_amplitudes = c_null_ptr
    type(c_ptr) :: source_locations = c_null_ptr    ! int64 (ndim, nsources, nshots)
    type(c_ptr) :: receiver_locations = c_null_ptr  ! int64 (ndim, nreceivers, nshots)
  end type

  type, bind(c), public :: sciproxy_scalar_born_input
    type(sciproxy_scalar_input) :: background
    type(c_ptr) :: scatter = c_null_ptr
    integer(c_int64_t) :: nbg_receivers = 0
    type(c_ptr) :: bg_receiver_locations = c_null_ptr
  end type

  type, bind(c), public :: sciproxy_scalar_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int) :: accuracy = 4
    integer(c_int64_t) :: pml_width(6) = 20
    real(c_double) :: pml_freq = 25, max_vel = 0
    integer(c_int64_t) :: survey_pad(6) = -1
    integer(c_int) :: has_origin = 0
    integer(c_int64_t) :: origin(3) = 0
    integer(c_int64_t) :: model_gradient_sampling_interval = 1
    real(c_double) :: freq_taper_frac = 0, time_pad_frac = 0
    integer(c_int) :: time_taper = 0, storage = 0, storage_compression = 0
    type(c_ptr) :: storage_directory = c_null_ptr
    integer(c_int) :: nparallel = 0
    integer(c_int) :: autotune = 0  ! cpu: sweep and block sizes chosen by timing (cached)
    ! MPI: the communicator's handle; shots and results as in c/wave.h
    integer(c_int64_t) :: comm = SCIPROXY_NO_COMM
    integer(c_int) :: shots = 0, results = 0
  end type

  type, bind(c), public :: sciproxy_scalar_state
    integer(c_int64_t) :: padded_shape(3) = 1
    type(c_ptr) :: wavefield = c_null_ptr, previous_wavefield = c_null_ptr
    type(c_ptr) :: psi(3) = c_null_ptr, zeta(3) = c_null_ptr
  end type

  ! ---- tti (c/tti.h) ----
  type, bind(c), public :: sciproxy_tti_model
    integer(c_int64_t) :: shape(3) = 1  ! C order: shape(1) is the depth axis, the slowest
    real(c_double) :: spacing(3) = 1
    type(c_ptr) :: vp = c_null_ptr, buoyancy = c_null_ptr, epsilon = c_null_ptr, &
                   delta = c_null_ptr, theta = c_null_ptr, phi = c_null_ptr, f = c_null_ptr
  end type

  type, bind(c), public :: sciproxy_tti_input
    type(sciproxy_tti_model) :: model
    real(c_double) :: dt = 0
    integer(c_int64_t) :: nt = 0, nshots = 1, nsources = 0, nreceivers = 0
    type(c_ptr) :: source_amplitudes = c_null_ptr
    type(c_ptr) :: source_locations = c_null_ptr    ! int64 (3, nsources, nshots)
    type(c_ptr) :: receiver_locations = c_null_ptr  ! int64 (3, nreceivers, nshots)
  end type

  type, bind(c), public :: sciproxy_tti_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int) :: space_order = 8
    integer(c_int64_t) :: sponge_width(6) = 60
    real(c_double) :: q_min = 0.1d0, q_interior = 100, freq_q = 5, default_f = 0.85d0
    integer(c_int) :: free_surface = 0, nparallel = 0
    ! MPI: the communicator's handle; the ranks per axis of the grid of subdomains (0: chosen),
    ! C's order (axis 0 the depth), as in c/tti.h
    integer(c_int64_t) :: comm = SCIPROXY_NO_COMM
    integer(c_int) :: process_grid(3) = 0
  end type

  type, bind(c), public :: sciproxy_tti_demo_input
    integer(c_int64_t) :: shape(3) = 1
    real(c_double) :: spacing(3) = 10
    real(c_double) :: dt = 0
    integer(c_int64_t) :: nt = 0
    real(c_double) :: vp = 0, b = 0, epsilon = 0, eta = 0, f = 0, theta = 0, phi = 0, damping = 0
    type(c_ptr) :: vp_field = c_null_ptr, b_field = c_null_ptr, epsilon_field = c_null_ptr, &
                   eta_field = c_null_ptr, f_field = c_null_ptr, theta_field = c_null_ptr, &
                   phi_field = c_null_ptr, damping_field = c_null_ptr
    real(c_double) :: source_position(3) = 0
    type(c_ptr) :: source_amplitudes = c_null_ptr
    type(c_ptr) :: initial_u = c_null_ptr, initial_u_prev = c_null_ptr
  end type

  type, bind(c), public :: sciproxy_tti_demo_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int) :: space_order = 8, form = 1, nparallel = 0
    integer(c_int) :: autotune = 0  ! cpu, fused: tile budget and steps per sweep by timing
    ! MPI: the communicator's handle; the ranks per axis of the grid of blocks (0: chosen), C's
    ! order (x, y, z); results 0 (every rank the whole grid), 1 (rank 0 only) or 2 (each rank its
    ! block, sciproxy_tti_demo_block), as in c/tti.h
    integer(c_int64_t) :: comm = SCIPROXY_NO_COMM
    integer(c_int) :: process_grid(3) = 0
    integer(c_int) :: results = 0
  end type

  ! ---- specex (c/specex.h) ----
  ! The PSF handle is a type(c_ptr) (sciproxy_specex_psf_load, sciproxy_specex_psf_free).
  type, bind(c), public :: sciproxy_specex_psf_info
    integer(c_int32_t) :: nspec = 0, version = 0
    integer(c_int64_t) :: npix_x = 0, npix_y = 0
    integer(c_int32_t) :: hsizex = 0, hsizey = 0, ghdegx = 0, ghdegy = 0
    real(c_double) :: psferr = 0, wmin = 0, wmax = 0, wmin_all = 0, wmax_all = 0
  end type

  type, bind(c), public :: sciproxy_specex_input
    type(c_ptr) :: psf = c_null_ptr
    type(c_ptr) :: image = c_null_ptr, ivar = c_null_ptr  ! C [ny, nx]: Fortran (nx, ny)
    integer(c_int64_t) :: ny = 0, nx = 0
    integer(c_int) :: has_range = 0
    integer(c_int64_t) :: xmin = 0, xmax = 0, ymin = 0, ymax = 0
    integer(c_int32_t) :: specmin = 0, nspec = 0
    type(c_ptr) :: wavelengths = c_null_ptr
    integer(c_int64_t) :: nwave = 0
  end type

  type, bind(c), public :: sciproxy_specex_options
    integer(c_size_t) :: struct_size = 0
    type(c_ptr) :: device = c_null_ptr
    integer(c_int32_t) :: bundlesize = 25, nsubbundles = 1, wavesize = 50
    real(c_double) :: regularize = 0
    integer(c_int) :: ndecorr = 0
    real(c_double) :: pixpad_frac = 0.8d0, wavepad_frac = 0.2d0, psferr = -1
    integer(c_int) :: full_output = 1, nparallel = 0
    ! The communicator's Fortran handle (comm%MPI_VAL), or -1 (SCIPROXY_NO_COMM): this process.
    integer(c_int64_t) :: comm = -1
    ! On several ranks: 1 (default) the results on rank 0 alone, 0 on every rank.
    integer(c_int32_t) :: result_layout = 1
  end type

  type, bind(c), public :: sciproxy_specex_frame_input
    type(c_ptr) :: image_path = c_null_ptr, psf_path = c_null_ptr, frame_path = c_null_ptr, &
                   model_path = c_null_ptr
    real(c_double) :: wmin = 0, wmax = 0, dw = 0
    integer(c_int32_t) :: specmin = 0, nspec = 0
  end type

  public :: sciproxy_last_error_message, sciproxy_version_string, sciproxy_c_string
  public :: sciproxy_recording_json_string, sciproxy_recording_text_string
  public :: sciproxy_parstack, sciproxy_parstack_window

  ! The C functions, under their C names.
  public :: sciproxy_cuda_compiled, sciproxy_cuda_device_count, sciproxy_max_threads, &
            sciproxy_mpi_compiled, sciproxy_agree_status
  public :: sciproxy_recording_begin, sciproxy_recording_end, sciproxy_recording_json, &
            sciproxy_recording_text, sciproxy_recording_count, sciproxy_recording_passed
  public :: sciproxy_set_cancellation, sciproxy_request_cancellation, &
            sciproxy_clear_cancellation_request, sciproxy_cancellation_requested
  public :: sciproxy_parstack_options_default, sciproxy_parstack_extent_f64, &
            sciproxy_parstack_extent_f32, sciproxy_parstack_f64, sciproxy_parstack_f32, &
            sciproxy_argmax_options_default, sciproxy_argmax_f64, sciproxy_argmax_f32
  public :: sciproxy_scalar_options_default, sciproxy_scalar_f64, sciproxy_scalar_f32, &
            sciproxy_scalar_state_shape_f64, sciproxy_scalar_state_shape_f32, &
            sciproxy_scalar_gradient_f64, sciproxy_scalar_gradient_f32, &
            sciproxy_scalar_born_f64, sciproxy_scalar_born_f32, &
            sciproxy_scalar_born_gradient_f64, sciproxy_scalar_born_gradient_f32
  public :: sciproxy_tti_options_default, sciproxy_tti_f64, sciproxy_tti_f32, &
            sciproxy_tti_adjoint_f64, sciproxy_tti_adjoint_f32, sciproxy_tti_max_dt_f64, &
            sciproxy_tti_max_dt_f32, sciproxy_tti_demo_options_default, sciproxy_tti_demo_f64, &
            sciproxy_tti_demo_f32, sciproxy_tti_demo_dt_limit_f64, sciproxy_tti_demo_dt_limit_f32, &
            sciproxy_tti_demo_block_f64, sciproxy_tti_demo_block_f32
  public :: sciproxy_specex_psf_load, sciproxy_specex_psf_free, sciproxy_specex_psf_get_info, &
            sciproxy_specex_psf_xy, sciproxy_specex_psf_wavelength, sciproxy_specex_psf_xyrange, &
            sciproxy_specex_project, sciproxy_specex_options_default, sciproxy_specex_ex2d_shape, &
            sciproxy_specex_ex2d, sciproxy_specex_extract_frame, sciproxy_specex_wavelength_grid

  interface
    ! ---- core ----
    function c_last_error() bind(C, name="sciproxy_last_error") result(message)
      import :: c_ptr
      type(c_ptr) :: message
    end function
    function c_version() bind(C, name="sciproxy_version") result(version)
      import :: c_ptr
      type(c_ptr) :: version
    end function
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
    function sciproxy_cuda_compiled() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
    function sciproxy_mpi_compiled() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
    ! Collective over comm: a status that is not SCIPROXY_OK on any rank becomes every rank's,
    ! naming the rank (c/core.h); for checks made before a collective call.
    function sciproxy_agree_status(comm, local) bind(C) result(status)
      import :: c_int, c_int64_t
      integer(c_int64_t), value :: comm
      integer(c_int), value :: local
      integer(c_int) :: status
    end function
    function sciproxy_cuda_device_count() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
    function sciproxy_max_threads() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
    function sciproxy_recording_begin(verify) bind(C) result(status)
      import :: c_int
      integer(c_int), value :: verify
      integer(c_int) :: status
    end function
    function sciproxy_recording_end() bind(C) result(status)
      import :: c_int
      integer(c_int) :: status
    end function
    function sciproxy_recording_json(buffer, size) bind(C) result(n)
      import :: c_char, c_size_t
      character(kind=c_char), intent(out), optional :: buffer(*)
      integer(c_size_t), value :: size
      integer(c_size_t) :: n
    end function
    function sciproxy_recording_text(buffer, size) bind(C) result(n)
      import :: c_char, c_size_t
      character(kind=c_char), intent(out), optional :: buffer(*)
      integer(c_size_t), value :: size
      integer(c_size_t) :: n
    end function
    function sciproxy_recording_count() bind(C) result(n)
      import :: c_int64_t
      integer(c_int64_t) :: n
    end function
    function sciproxy_recording_passed() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function
    ! Cancellation (c/core.h): flag is c_loc of an integer(c_int), target (volatile where another
    ! thread or a signal handler sets it), or c_null_ptr; callback is c_funloc of a bind(c)
    ! function integer(c_int) f(user_data) with type(c_ptr), value :: user_data, or
    ! c_null_funptr. Both null clear it. A cancelled call returns SCIPROXY_ERROR_CANCELLED.
    function sciproxy_set_cancellation(flag, callback, user_data) bind(C) result(status)
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: flag
      type(c_funptr), value :: callback
      type(c_ptr), value :: user_data
      integer(c_int) :: status
    end function
    subroutine sciproxy_request_cancellation() bind(C)
    end subroutine
    subroutine sciproxy_clear_cancellation_request() bind(C)
    end subroutine
    function sciproxy_cancellation_requested() bind(C) result(r)
      import :: c_int
      integer(c_int) :: r
    end function

    ! ---- stack ----
    subroutine sciproxy_parstack_options_default(options) bind(C)
      import :: sciproxy_parstack_options
      type(sciproxy_parstack_options), intent(out) :: options
    end subroutine
    function sciproxy_parstack_extent_f64(input, options, offsetout, lengthout) bind(C) &
        result(status)
      import :: sciproxy_parstack_input, sciproxy_parstack_options, c_int, c_int32_t, c_int64_t
      type(sciproxy_parstack_input), intent(in) :: input
      type(sciproxy_parstack_options), intent(in), optional :: options
      integer(c_int32_t), intent(out) :: offsetout
      integer(c_int64_t), intent(out) :: lengthout
      integer(c_int) :: status
    end function
    function sciproxy_parstack_extent_f32(input, options, offsetout, lengthout) bind(C) &
        result(status)
      import :: sciproxy_parstack_input, sciproxy_parstack_options, c_int, c_int32_t, c_int64_t
      type(sciproxy_parstack_input), intent(in) :: input
      type(sciproxy_parstack_options), intent(in), optional :: options
      integer(c_int32_t), intent(out) :: offsetout
      integer(c_int64_t), intent(out) :: lengthout
      integer(c_int) :: status
    end function
    function sciproxy_parstack_f64(input, options, result, result_size, offsetout, lengthout) &
        bind(C) result(status)
      import :: sciproxy_parstack_input, sciproxy_parstack_options, c_int, c_int32_t, &
                c_int64_t, c_double
      type(sciproxy_parstack_input), intent(in) :: input
      type(sciproxy_parstack_options), intent(in), optional :: options
      real(c_double), intent(inout) :: result(*)
      integer(c_int64_t), value :: result_size
      integer(c_int32_t), intent(out), optional :: offsetout
      integer(c_int64_t), intent(out), optional :: lengthout
      integer(c_int) :: status
    end function
    function sciproxy_parstack_f32(input, options, result, result_size, offsetout, lengthout) &
        bind(C) result(status)
      import :: sciproxy_parstack_input, sciproxy_parstack_options, c_int, c_int32_t, &
                c_int64_t, c_float
      type(sciproxy_parstack_input), intent(in) :: input
      type(sciproxy_parstack_options), intent(in), optional :: options
      real(c_float), intent(inout) :: result(*)
      integer(c_int64_t), value :: result_size
      integer(c_int32_t), intent(out), optional :: offsetout
      integer(c_int64_t), intent(out), optional :: lengthout
      integer(c_int) :: status
    end function
    subroutine sciproxy_argmax_options_default(options) bind(C)
      import :: sciproxy_argmax_options
      type(sciproxy_argmax_options), intent(out) :: options
    end subroutine
    function sciproxy_argmax_f64(input, options, out) bind(C) result(status)
      import :: sciproxy_argmax_input, sciproxy_argmax_options, c_int, c_int32_t
      type(sciproxy_argmax_input), intent(in) :: input
      type(sciproxy_argmax_options), intent(in), optional :: options
      integer(c_int32_t), intent(out) :: out(*)  ! uint32 in C: 0-based row indices
      integer(c_int) :: status
    end function
    function sciproxy_argmax_f32(input, options, out) bind(C) result(status)
      import :: sciproxy_argmax_input, sciproxy_argmax_options, c_int, c_int32_t
      type(sciproxy_argmax_input), intent(in) :: input
      type(sciproxy_argmax_options), intent(in), optional :: options
      integer(c_int32_t), intent(out) :: out(*)
      integer(c_int) :: status
    end function

    ! ---- wave ----
    subroutine sciproxy_scalar_options_default(options) bind(C)
      import :: sciproxy_scalar_options
      type(sciproxy_scalar_options), intent(out) :: options
    end subroutine
    function sciproxy_scalar_f64(input, options, initial, receiver_amplitudes, final_state) &
        bind(C) result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, sciproxy_scalar_state, c_int, &
                c_double
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      type(sciproxy_scalar_state), intent(in), optional :: initial
      real(c_double), intent(out), optional :: receiver_amplitudes(*)
      type(sciproxy_scalar_state), intent(inout), optional :: final_state
      integer(c_int) :: status
    end function
    function sciproxy_scalar_f32(input, options, initial, receiver_amplitudes, final_state) &
        bind(C) result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, sciproxy_scalar_state, c_int, &
                c_float
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      type(sciproxy_scalar_state), intent(in), optional :: initial
      real(c_float), intent(out), optional :: receiver_amplitudes(*)
      type(sciproxy_scalar_state), intent(inout), optional :: final_state
      integer(c_int) :: status
    end function
    function sciproxy_scalar_state_shape_f64(input, options, padded_shape) bind(C) &
        result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, c_int, c_int64_t
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      integer(c_int64_t), intent(out) :: padded_shape(*)
      integer(c_int) :: status
    end function
    function sciproxy_scalar_state_shape_f32(input, options, padded_shape) bind(C) &
        result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, c_int, c_int64_t
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      integer(c_int64_t), intent(out) :: padded_shape(*)
      integer(c_int) :: status
    end function
    function sciproxy_scalar_gradient_f64(input, options, initial, grad_receiver_amplitudes, &
                                          grad_final, grad_v, grad_source_amplitudes, &
                                          grad_initial) bind(C) result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, sciproxy_scalar_state, c_int, &
                c_double
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      type(sciproxy_scalar_state), intent(in), optional :: initial
      real(c_double), intent(in), optional :: grad_receiver_amplitudes(*)
      type(sciproxy_scalar_state), intent(in), optional :: grad_final
      real(c_double), intent(out) :: grad_v(*)
      real(c_double), intent(out), optional :: grad_source_amplitudes(*)
      type(sciproxy_scalar_state), intent(inout), optional :: grad_initial
      integer(c_int) :: status
    end function
    function sciproxy_scalar_gradient_f32(input, options, initial, grad_receiver_amplitudes, &
                                          grad_final, grad_v, grad_source_amplitudes, &
                                          grad_initial) bind(C) result(status)
      import :: sciproxy_scalar_input, sciproxy_scalar_options, sciproxy_scalar_state, c_int, &
                c_float
      type(sciproxy_scalar_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      type(sciproxy_scalar_state), intent(in), optional :: initial
      real(c_float), intent(in), optional :: grad_receiver_amplitudes(*)
      type(sciproxy_scalar_state), intent(in), optional :: grad_final
      real(c_float), intent(out) :: grad_v(*)
      real(c_float), intent(out), optional :: grad_source_amplitudes(*)
      type(sciproxy_scalar_state), intent(inout), optional :: grad_initial
      integer(c_int) :: status
    end function
    function sciproxy_scalar_born_f64(input, options, receiver_amplitudes, &
                                      bg_receiver_amplitudes) bind(C) result(status)
      import :: sciproxy_scalar_born_input, sciproxy_scalar_options, c_int, c_double
      type(sciproxy_scalar_born_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      real(c_double), intent(out), optional :: receiver_amplitudes(*), bg_receiver_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_scalar_born_f32(input, options, receiver_amplitudes, &
                                      bg_receiver_amplitudes) bind(C) result(status)
      import :: sciproxy_scalar_born_input, sciproxy_scalar_options, c_int, c_float
      type(sciproxy_scalar_born_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      real(c_float), intent(out), optional :: receiver_amplitudes(*), bg_receiver_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_scalar_born_gradient_f64(input, options, grad_receiver_amplitudes, &
                                               grad_bg_receiver_amplitudes, grad_scatter, &
                                               grad_source_amplitudes) bind(C) result(status)
      import :: sciproxy_scalar_born_input, sciproxy_scalar_options, c_int, c_double
      type(sciproxy_scalar_born_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      real(c_double), intent(in), optional :: grad_receiver_amplitudes(*), &
                                              grad_bg_receiver_amplitudes(*)
      real(c_double), intent(out) :: grad_scatter(*)
      real(c_double), intent(out), optional :: grad_source_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_scalar_born_gradient_f32(input, options, grad_receiver_amplitudes, &
                                               grad_bg_receiver_amplitudes, grad_scatter, &
                                               grad_source_amplitudes) bind(C) result(status)
      import :: sciproxy_scalar_born_input, sciproxy_scalar_options, c_int, c_float
      type(sciproxy_scalar_born_input), intent(in) :: input
      type(sciproxy_scalar_options), intent(in), optional :: options
      real(c_float), intent(in), optional :: grad_receiver_amplitudes(*), &
                                             grad_bg_receiver_amplitudes(*)
      real(c_float), intent(out) :: grad_scatter(*)
      real(c_float), intent(out), optional :: grad_source_amplitudes(*)
      integer(c_int) :: status
    end function

    ! ---- tti ----
    subroutine sciproxy_tti_options_default(options) bind(C)
      import :: sciproxy_tti_options
      type(sciproxy_tti_options), intent(out) :: options
    end subroutine
    function sciproxy_tti_f64(input, options, receiver_amplitudes) bind(C) result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_double
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_double), intent(out), optional :: receiver_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_tti_f32(input, options, receiver_amplitudes) bind(C) result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_float
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_float), intent(out), optional :: receiver_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_tti_adjoint_f64(input, options, receiver_data, source_amplitudes) bind(C) &
        result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_double
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_double), intent(in), optional :: receiver_data(*)
      real(c_double), intent(out), optional :: source_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_tti_adjoint_f32(input, options, receiver_data, source_amplitudes) bind(C) &
        result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_float
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_float), intent(in), optional :: receiver_data(*)
      real(c_float), intent(out), optional :: source_amplitudes(*)
      integer(c_int) :: status
    end function
    function sciproxy_tti_max_dt_f64(input, options, max_dt) bind(C) result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_double
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_double), intent(out) :: max_dt
      integer(c_int) :: status
    end function
    function sciproxy_tti_max_dt_f32(input, options, max_dt) bind(C) result(status)
      import :: sciproxy_tti_input, sciproxy_tti_options, c_int, c_double
      type(sciproxy_tti_input), intent(in) :: input
      type(sciproxy_tti_options), intent(in), optional :: options
      real(c_double), intent(out) :: max_dt
      integer(c_int) :: status
    end function
    subroutine sciproxy_tti_demo_options_default(options) bind(C)
      import :: sciproxy_tti_demo_options
      type(sciproxy_tti_demo_options), intent(out) :: options
    end subroutine
    function sciproxy_tti_demo_f64(input, options, u, u_prev) bind(C) result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_double
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      real(c_double), intent(out), optional :: u(*), u_prev(*)  ! C [NX, NY, NZ]: u(NZ, NY, NX)
      integer(c_int) :: status
    end function
    function sciproxy_tti_demo_f32(input, options, u, u_prev) bind(C) result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_float
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      real(c_float), intent(out), optional :: u(*), u_prev(*)
      integer(c_int) :: status
    end function
    ! The part of the grid a run writes to u and u_prev on this rank (origin and shape in C's
    ! order (x, y, z): u(shape(3), shape(2), shape(1)) holds the grid's points from origin + 1),
    ! without running it; process_grid optional. Not collective.
    function sciproxy_tti_demo_block_f64(input, options, origin, shape, process_grid) bind(C) &
        result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_int64_t
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      integer(c_int64_t), intent(out) :: origin(3), shape(3)
      integer(c_int), intent(out), optional :: process_grid(3)
      integer(c_int) :: status
    end function
    function sciproxy_tti_demo_block_f32(input, options, origin, shape, process_grid) bind(C) &
        result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_int64_t
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      integer(c_int64_t), intent(out) :: origin(3), shape(3)
      integer(c_int), intent(out), optional :: process_grid(3)
      integer(c_int) :: status
    end function
    function sciproxy_tti_demo_dt_limit_f64(input, options, dt_limit) bind(C) result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_double
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      real(c_double), intent(out) :: dt_limit
      integer(c_int) :: status
    end function
    function sciproxy_tti_demo_dt_limit_f32(input, options, dt_limit) bind(C) result(status)
      import :: sciproxy_tti_demo_input, sciproxy_tti_demo_options, c_int, c_double
      type(sciproxy_tti_demo_input), intent(in) :: input
      type(sciproxy_tti_demo_options), intent(in), optional :: options
      real(c_double), intent(out) :: dt_limit
      integer(c_int) :: status
    end function
    ! ---- specex ----
    ! path: a NUL-terminated string, e.g. "psf.fits"//c_null_char. psf receives the handle.
    function sciproxy_specex_psf_load(path, psf) bind(C) result(status)
      import :: c_char, c_ptr, c_int
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), intent(out) :: psf
      integer(c_int) :: status
    end function
    subroutine sciproxy_specex_psf_free(psf) bind(C)
      import :: c_ptr
      type(c_ptr), value :: psf
    end subroutine
    function sciproxy_specex_psf_get_info(psf, info) bind(C) result(status)
      import :: c_ptr, c_int, sciproxy_specex_psf_info
      type(c_ptr), value :: psf
      type(sciproxy_specex_psf_info), intent(out) :: info
      integer(c_int) :: status
    end function
    function sciproxy_specex_psf_xy(psf, ispec, wavelengths, n, x, y) bind(C) result(status)
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_double
      type(c_ptr), value :: psf
      integer(c_int32_t), value :: ispec
      real(c_double), intent(in) :: wavelengths(*)
      integer(c_int64_t), value :: n
      real(c_double), intent(out), optional :: x(*), y(*)
      integer(c_int) :: status
    end function
    function sciproxy_specex_psf_wavelength(psf, ispec, y, n, wavelengths) bind(C) &
        result(status)
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_double
      type(c_ptr), value :: psf
      integer(c_int32_t), value :: ispec
      real(c_double), intent(in) :: y(*)
      integer(c_int64_t), value :: n
      real(c_double), intent(out) :: wavelengths(*)
      integer(c_int) :: status
    end function
    ! range = [xmin, xmax, ymin, ymax]
    function sciproxy_specex_psf_xyrange(psf, specmin, specmax, wavemin, wavemax, range) bind(C) &
        result(status)
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_double
      type(c_ptr), value :: psf
      integer(c_int32_t), value :: specmin, specmax
      real(c_double), value :: wavemin, wavemax
      integer(c_int64_t), intent(out) :: range(4)
      integer(c_int) :: status
    end function
    ! phot: C [nspec, nwave] = Fortran (nwave, nspec); image: C [ny, nx] = Fortran (nx, ny).
    function sciproxy_specex_project(psf, wavelengths, nwave, phot, specmin, nspec, range, &
                                     nparallel, image, image_size) bind(C) result(status)
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_double
      type(c_ptr), value :: psf
      real(c_double), intent(in) :: wavelengths(*)
      integer(c_int64_t), value :: nwave
      real(c_double), intent(in) :: phot(*)
      integer(c_int32_t), value :: specmin, nspec
      integer(c_int64_t), intent(in), optional :: range(4)
      integer(c_int), value :: nparallel
      real(c_double), intent(out) :: image(*)
      integer(c_int64_t), value :: image_size
      integer(c_int) :: status
    end function
    subroutine sciproxy_specex_options_default(options) bind(C)
      import :: sciproxy_specex_options
      type(sciproxy_specex_options), intent(out) :: options
    end subroutine
    function sciproxy_specex_ex2d_shape(input, options, ndiag, npatches) bind(C) result(status)
      import :: sciproxy_specex_input, sciproxy_specex_options, c_int, c_int32_t, c_int64_t
      type(sciproxy_specex_input), intent(in) :: input
      type(sciproxy_specex_options), intent(in), optional :: options
      integer(c_int32_t), intent(out), optional :: ndiag
      integer(c_int64_t), intent(out), optional :: npatches
      integer(c_int) :: status
    end function
    ! flux, ivar, chi2pix, pixmask_fraction: Fortran (nwave, nspec); resolution
    ! (nwave, 2 ndiag + 1, nspec); model (nx, ny).
    function sciproxy_specex_ex2d(input, options, flux, ivar, resolution, resolution_size, &
                                  chi2pix, pixmask_fraction, model, ndiag) bind(C) result(status)
      import :: sciproxy_specex_input, sciproxy_specex_options, c_int, c_int32_t, c_int64_t, &
                c_double
      type(sciproxy_specex_input), intent(in) :: input
      type(sciproxy_specex_options), intent(in), optional :: options
      real(c_double), intent(out) :: flux(*), ivar(*)
      real(c_double), intent(out), optional :: resolution(*)
      integer(c_int64_t), value :: resolution_size
      real(c_double), intent(out), optional :: chi2pix(*), pixmask_fraction(*), model(*)
      integer(c_int32_t), intent(out), optional :: ndiag
      integer(c_int) :: status
    end function
    function sciproxy_specex_extract_frame(input, options, nwave, npatches) bind(C) &
        result(status)
      import :: sciproxy_specex_frame_input, sciproxy_specex_options, c_int, c_int64_t
      type(sciproxy_specex_frame_input), intent(in) :: input
      type(sciproxy_specex_options), intent(in), optional :: options
      integer(c_int64_t), intent(out), optional :: nwave, npatches
      integer(c_int) :: status
    end function
    function sciproxy_specex_wavelength_grid(wmin, wmax, dw, wavelengths, size, n) bind(C) &
        result(status)
      import :: c_int, c_int64_t, c_double
      real(c_double), value :: wmin, wmax, dw
      real(c_double), intent(out), optional :: wavelengths(*)
      integer(c_int64_t), value :: size
      integer(c_int64_t), intent(out), optional :: n
      integer(c_int) :: status
    end function
  end interface

  ! The strings handed out by sciproxy_c_string: C pointers into them must stay valid after the
  ! call, so they live as long as the program (each distinct text is kept once).
  integer, parameter :: max_strings = 32, max_length = 256
  character(kind=c_char), target, save :: strings(max_length, max_strings)
  integer, save :: nstrings = 0

contains

  ! A C string (NUL-terminated) with the text, valid for the life of the program, for the
  ! options' string fields: options%device = sciproxy_c_string("cpu"). Null when the text is
  ! too long or too many distinct texts were asked for (the library then names the field).
  function sciproxy_c_string(text) result(p)
    character(len=*), intent(in) :: text
    type(c_ptr) :: p
    integer :: k, n, i
    logical :: same
    p = c_null_ptr
    n = len_trim(text)
    if (n >= max_length) return
    do k = 1, nstrings
      same = strings(n + 1, k) == c_null_char
      do i = 1, n
        if (.not. same) exit
        same = strings(i, k) == text(i:i)
      end do
      if (same) then
        p = c_loc(strings(1, k))
        return
      end if
    end do
    if (nstrings == max_strings) return
    nstrings = nstrings + 1
    do i = 1, n
      strings(i, nstrings) = text(i:i)
    end do
    strings(n + 1, nstrings) = c_null_char
    p = c_loc(strings(1, nstrings))
  end function

  ! A C string as a Fortran one.
  function from_c(p) result(text)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function

  function sciproxy_last_error_message() result(message)
    character(len=:), allocatable :: message
    message = from_c(c_last_error())
  end function

  function sciproxy_version_string() result(version)
    character(len=:), allocatable :: version
    version = from_c(c_version())
  end function

  ! The recording's reports as JSON ("[]" when none) and as text (c/core.h).
  function sciproxy_recording_json_string() result(json)
    character(len=:), allocatable :: json
    character(kind=c_char), allocatable :: buffer(:)
    integer(c_size_t) :: n
    integer :: i
    n = sciproxy_recording_json(size=0_c_size_t)
    allocate (buffer(n + 1))
    n = sciproxy_recording_json(buffer, n + 1)
    allocate (character(len=n) :: json)
    do i = 1, int(n)
      json(i:i) = buffer(i)
    end do
  end function

  function sciproxy_recording_text_string() result(text)
    character(len=:), allocatable :: text
    character(kind=c_char), allocatable :: buffer(:)
    integer(c_size_t) :: n
    integer :: i
    n = sciproxy_recording_text(size=0_c_size_t)
    allocate (buffer(n + 1))
    n = sciproxy_recording_text(buffer, n + 1)
    allocate (character(len=n) :: text)
    do i = 1, int(n)
      text(i:i) = buffer(i)
    end do
  end function

  ! ---- parstack for traces of equal length in one array traces(nsamples, ntraces) ----
  ! Column-major shifts(ntraces, nshifts) is the C ABI's row-major (nshifts, ntraces): no copies.

  ! The input struct over traces(nsamples, ntraces); pointers and lengths must outlive its use.
  subroutine parstack_input(traces, offsets, shifts, pointers, lengths, input)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    integer(c_int32_t), intent(in), target, contiguous :: offsets(:), shifts(:, :)
    type(c_ptr), intent(out), target :: pointers(:)
    integer(c_int64_t), intent(out), target :: lengths(:)
    type(sciproxy_parstack_input), intent(out) :: input
    integer :: i
    do i = 1, size(traces, 2)
      pointers(i) = c_loc(traces(1, i))
      lengths(i) = size(traces, 1, kind=c_int64_t)
    end do
    input%traces = c_loc(pointers)
    input%lengths = c_loc(lengths)
    input%ntraces = size(traces, 2, kind=c_int64_t)
    input%offsets = c_loc(offsets)
    input%shifts = c_loc(shifts)
    input%nshifts = size(shifts, 2, kind=c_int64_t)
  end subroutine

  ! The default output window (pyrocko's): offsetout and lengthout of the full stack.
  function sciproxy_parstack_window(traces, offsets, shifts, offsetout, lengthout) result(status)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    integer(c_int32_t), intent(in), target, contiguous :: offsets(:), shifts(:, :)
    integer(c_int32_t), intent(out) :: offsetout
    integer(c_int64_t), intent(out) :: lengthout
    integer :: status
    type(c_ptr), target :: pointers(size(traces, 2))
    integer(c_int64_t), target :: lengths(size(traces, 2))
    type(sciproxy_parstack_input) :: input
    call parstack_input(traces, offsets, shifts, pointers, lengths, input)
    status = sciproxy_parstack_extent_f64(input, offsetout=offsetout, lengthout=lengthout)
  end function

  ! result(lengthout, nshifts) for method 0, result(1, nshifts) for method 1.
  ! lengthout < 0 on entry asks for the default window; offsetout and lengthout then receive it.
  function sciproxy_parstack(traces, offsets, shifts, weights, method, offsetout, lengthout, &
                             result, device, accumulate, nparallel, comm) result(status)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    integer(c_int32_t), intent(in), target, contiguous :: offsets(:), shifts(:, :)
    real(c_double), intent(in), target, contiguous :: weights(:, :)
    integer, intent(in) :: method
    integer(c_int32_t), intent(inout) :: offsetout
    integer(c_int64_t), intent(inout) :: lengthout
    real(c_double), intent(inout), contiguous :: result(:, :)
    character(len=*), intent(in), optional :: device
    logical, intent(in), optional :: accumulate
    integer, intent(in), optional :: nparallel
    ! MPI: the ranks' communicator (MPI_COMM_WORLD, or comm%MPI_VAL with mpi_f08); every rank
    ! passes the same arrays and receives the whole result.
    integer, intent(in), optional :: comm
    integer :: status
    type(c_ptr), target :: pointers(size(traces, 2))
    integer(c_int64_t), target :: lengths(size(traces, 2))
    type(sciproxy_parstack_input) :: input
    type(sciproxy_parstack_options) :: options
    call parstack_input(traces, offsets, shifts, pointers, lengths, input)
    input%weights = c_loc(weights)
    call sciproxy_parstack_options_default(options)
    options%method = int(method, c_int)
    options%offsetout = offsetout
    options%lengthout = lengthout
    if (present(device)) options%device = sciproxy_c_string(device)
    if (present(accumulate)) then
      if (accumulate) options%accumulate = 1
    end if
    if (present(nparallel)) options%nparallel = int(nparallel, c_int)
    if (present(comm)) options%comm = int(comm, c_int64_t)
    status = sciproxy_parstack_f64(input, options, result, size(result, kind=c_int64_t), &
                                   offsetout, lengthout)
  end function

end module sciproxy
