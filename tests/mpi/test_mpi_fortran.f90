! The Fortran module under mpiexec: sciproxy_parstack with comm=MPI_COMM_WORLD gives every rank
! the one-process result bit for bit, and so does the workshop operator sciproxy_tti_demo_f64 with
! options%comm = MPI_COMM_WORLD, on every rank (results 0) and in each rank's block (results 2,
! placed with sciproxy_tti_demo_block_f64). The diffusion granule on the ranks: a field of the
! wrong shape on the last rank only fails run on every rank, naming that rank, and none waits.
! Exit status 1 when any rank fails.
program test_mpi_fortran
  use, intrinsic :: iso_c_binding
  use mpi
  use sciproxy
  use sciproxy_diffusion
  implicit none
  real(c_double) :: traces(50, 3), weights(3, 7), expected(200, 7), result(200, 7)
  integer(c_int32_t) :: offsets(3), shifts(3, 7), offsetout
  integer(c_int64_t) :: lengthout
  integer :: ierr, rank, nranks, status, i, j, failures, worst
  ! The workshop operator: NX x NY x NZ points, vp varying per point (one step per sweep at
  ! order 8: blocks along x of 44 / 3 >= 7 points hold the ghost ring).
  integer, parameter :: nx = 44, ny = 30, nz = 27, nt = 9
  real(c_double), target :: vp(nz, ny, nx), wavelet(nt)
  real(c_double), allocatable :: alone(:, :, :), alone_prev(:, :, :), u(:, :, :), u_prev(:, :, :)
  type(sciproxy_tti_demo_input) :: demo
  type(sciproxy_tti_demo_options) :: demo_options
  integer(c_int64_t) :: origin(3), shape(3)
  integer(c_int) :: grid(3)
  real(c_double) :: limit, a
  integer :: k
  type(c_ptr) :: dgrid, granule
  type(sciproxy_diffusion_options) :: doptions
  type(sciproxy_diffusion_config) :: dconfig
  type(sciproxy_diffusion_info) :: dinfo
  real(c_double), allocatable :: dw(:, :), dvn(:, :), dexner(:, :), dtheta(:, :), &
    dhdef(:, :), ddiv(:, :), ddwdx(:, :), ddwdy(:, :)
  integer :: nc, ne, nl, wl
  character(len=:), allocatable :: message

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  failures = 0
  do i = 1, 3
    do j = 1, 50
      traces(j, i) = sin(0.2d0 * j + i)
    end do
    offsets(i) = int(3 * i, c_int32_t)
  end do
  do j = 1, 7
    do i = 1, 3
      shifts(i, j) = int(mod(11 * i + 5 * j, 21) - 10, c_int32_t)
      weights(i, j) = 0.5d0 + 0.1d0 * i
    end do
  end do
  status = sciproxy_parstack_window(traces, offsets, shifts, offsetout, lengthout)
  if (status /= SCIPROXY_OK .or. lengthout > 200) failures = failures + 1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, &
                             expected(1:lengthout, :), device="cpu")
  if (status /= SCIPROXY_OK) failures = failures + 1
  result = -1d0
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, &
                             result(1:lengthout, :), device="cpu", comm=MPI_COMM_WORLD)
  if (status /= SCIPROXY_OK) then
    print '(a, i0, 2a)', 'rank ', rank, ': ', sciproxy_last_error_message()
    failures = failures + 1
  end if
  if (any(result(1:lengthout, :) /= expected(1:lengthout, :))) then
    print '(a, i0, a)', 'rank ', rank, ': FAILED: the ranks'' stack differs from one process'
    failures = failures + 1
  end if

  ! tti_demo: one process, then the ranks (the grid split along x), whole and in blocks.
  do i = 1, nx
    do j = 1, ny
      do k = 1, nz
        vp(k, j, i) = 1500 + 20 * i + 9 * mod(j + 2 * k, 7)
      end do
    end do
  end do
  call sciproxy_tti_demo_options_default(demo_options)
  demo_options%device = sciproxy_c_string("cpu")
  demo_options%nparallel = 1  ! the ranks share the machine's cores
  demo%shape = [integer(c_int64_t) :: nx, ny, nz]
  demo%spacing = 10
  demo%nt = nt
  demo%vp = 1500
  demo%vp_field = c_loc(vp)
  demo%b = 1
  demo%epsilon = 0.2d0
  demo%eta = 0.4d0
  demo%f = 0.85d0
  demo%theta = 0.5d0
  demo%phi = 0.3d0
  demo%damping = 0.002d0
  demo%source_position = [145.4d0, 143d0, 127d0]
  status = sciproxy_tti_demo_dt_limit_f64(demo, demo_options, limit)
  if (status /= SCIPROXY_OK) failures = failures + 1
  demo%dt = 0.9d0 * limit
  do k = 1, nt
    a = 3.14159265d0 * 0.3d0 * (k - 4)
    wavelet(k) = (1 - 2 * a * a) * exp(-a * a)
  end do
  demo%source_amplitudes = c_loc(wavelet)
  allocate (alone(nz, ny, nx), alone_prev(nz, ny, nx), u(nz, ny, nx), u_prev(nz, ny, nx))
  status = sciproxy_tti_demo_f64(demo, demo_options, alone, alone_prev)
  if (status /= SCIPROXY_OK .or. maxval(abs(alone)) == 0) then
    print '(a, i0, 2a)', 'rank ', rank, ': FAILED: tti_demo alone: ', sciproxy_last_error_message()
    failures = failures + 1
  end if
  demo_options%comm = MPI_COMM_WORLD
  demo_options%process_grid = [nranks, 1, 1]
  u = -1
  u_prev = -1
  status = sciproxy_tti_demo_f64(demo, demo_options, u, u_prev)
  if (status /= SCIPROXY_OK) then
    print '(a, i0, 2a)', 'rank ', rank, ': ', sciproxy_last_error_message()
    failures = failures + 1
  end if
  if (any(u /= alone) .or. any(u_prev /= alone_prev)) then
    print '(a, i0, a)', 'rank ', rank, ': FAILED: tti_demo on the ranks differs from one process'
    failures = failures + 1
  end if
  demo_options%results = 2
  status = sciproxy_tti_demo_block_f64(demo, demo_options, origin, shape, grid)
  if (status /= SCIPROXY_OK .or. any(grid /= [nranks, 1, 1]) .or. &
      any(origin(2:3) /= 0) .or. shape(2) /= ny .or. shape(3) /= nz) then
    print '(a, i0, 2a)', 'rank ', rank, ': FAILED: tti_demo block ', sciproxy_last_error_message()
    failures = failures + 1
  else
    deallocate (u, u_prev)
    allocate (u(shape(3), shape(2), shape(1)), u_prev(shape(3), shape(2), shape(1)))
    status = sciproxy_tti_demo_f64(demo, demo_options, u, u_prev)
    if (status /= SCIPROXY_OK .or. &
        any(u /= alone(:, :, origin(1) + 1:origin(1) + shape(1))) .or. &
        any(u_prev /= alone_prev(:, :, origin(1) + 1:origin(1) + shape(1)))) then
      print '(a, i0, a)', 'rank ', rank, ': FAILED: tti_demo''s block differs from one process'
      failures = failures + 1
    end if
  end if

  ! Diffusion: w one level short on the last rank only.
  status = sciproxy_diffusion_grid_icosahedral(2_c_int32_t, 2_c_int32_t, dgrid)
  call sciproxy_diffusion_options_default(doptions)
  doptions%device = sciproxy_c_string("cpu")
  doptions%comm = int(MPI_COMM_WORLD, c_int64_t)
  call sciproxy_diffusion_config_default(dconfig)
  if (status == SCIPROXY_OK) &
    status = sciproxy_diffusion_init_computed(dgrid, doptions, dconfig, 5_c_int32_t, granule)
  if (status == SCIPROXY_OK) status = sciproxy_diffusion_get_info(granule, dinfo)
  if (status /= SCIPROXY_OK) then
    print '(a, i0, 2a)', 'rank ', rank, ': FAILED: diffusion init ', sciproxy_last_error_message()
    failures = failures + 1
  else
    nc = dinfo%num_cells
    ne = dinfo%num_edges
    nl = dinfo%num_levels
    wl = nl + 1
    if (rank == nranks - 1) wl = nl
    allocate (dw(nc, wl), dvn(ne, nl), dexner(nc, nl), dtheta(nc, nl), dhdef(nc, nl + 1), &
              ddiv(nc, nl + 1), ddwdx(nc, nl + 1), ddwdy(nc, nl + 1))
    dw = 0
    dvn = 1
    dexner = 0.8d0
    dtheta = 300
    status = sciproxy_diffusion_run(granule, dw, dvn, dexner, dtheta, dhdef, ddiv, ddwdx, ddwdy, &
                                    10d0, .true.)
    message = sciproxy_last_error_message()
    if (status /= SCIPROXY_ERROR_INVALID_ARGUMENT .or. index(message, 'w: expected') == 0 .or. &
        (nranks > 1 .and. index(message, 'rank ') /= 1)) then
      print '(a, i0, a, i0, 2a)', 'rank ', rank, &
        ': FAILED: diffusion run with a bad w on the last rank: status ', status, ', message: ', &
        message
      failures = failures + 1
    end if
    call sciproxy_diffusion_free(granule)
  end if
  call sciproxy_diffusion_grid_free(dgrid)

  call MPI_Allreduce(failures, worst, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (worst == 0) then
      print '(a, i0, a)', 'test_mpi_fortran: ', nranks, ' ranks: all checks passed'
    else
      print '(a, i0, a)', 'test_mpi_fortran: ', nranks, ' ranks: FAILED'
    end if
  end if
  call MPI_Finalize(ierr)
  if (worst /= 0) stop 1
end program
