! The tti family from Fortran: a small coupled P/M forward on a tilted anisotropic model (finite,
! non-zero receivers; cpu against reference, relative 1e-12), the adjoint's dot-product test
! (relative 1e-10), the workshop demo operator (finite, non-zero, cpu against reference), the
! options' defaults and size (the MPI fields included), and errors that name their argument (a
! process grid of several ranks on one process among them).
program test_tti
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  integer, parameter :: n = 10, nt = 30, nrec = 2, d = 12, dnt = 20
  real(c_double), parameter :: pi = 3.14159265358979323846d0
  ! C's [n, n, n] model is (n, n, n) here with the first index the fastest (C's axis 2).
  real(c_double), target :: vp(n, n, n), eps(n, n, n), delta(n, n, n), theta(n, n, n)
  real(c_double), target :: amps(nt, 1, 1), out(nt, nrec, 1), out_ref(nt, nrec, 1), &
                            data(nt, nrec, 1), back(nt, 1, 1)
  real(c_double), target :: src_wavelet(dnt), u(d, d, d), u_ref(d, d, d)
  integer(c_int64_t), target :: src(3, 1, 1), rec(3, nrec, 1)
  type(sciproxy_tti_input) :: input
  type(sciproxy_tti_options) :: options
  type(sciproxy_tti_demo_input) :: demo
  type(sciproxy_tti_demo_options) :: demo_options
  integer :: status, failures, t
  real(c_double) :: lhs, rhs, max_dt, limit, a

  failures = 0
  vp = 2000
  eps = 0.2d0
  delta = 0.1d0
  theta = 0.4d0
  do t = 1, n
    vp(:, :, t) = 1800 + 40 * t  ! faster with depth (C's axis 0, the last index here)
  end do
  do t = 1, nt
    amps(t, 1, 1) = sin(0.3d0 * t) * exp(-0.01d0 * (t - 8)**2)
  end do
  data(:, :, 1) = reshape([(cos(0.21d0 * t) - 0.1d0, t = 1, nt * nrec)], [nt, nrec])
  src(:, 1, 1) = [4, 5, 5]
  rec(:, 1, 1) = [2, 3, 7]
  rec(:, 2, 1) = [6, 8, 2]

  call sciproxy_tti_options_default(options)
  call check(options%struct_size > 0 .and. options%space_order == 8 .and. &
             all(options%sponge_width == 60) .and. options%q_min == 0.1d0 .and. &
             options%q_interior == 100 .and. options%default_f == 0.85d0 .and. &
             options%free_surface == 0 .and. options%comm == SCIPROXY_NO_COMM .and. &
             all(options%process_grid == 0), "options defaults")
  call check(c_sizeof(options) == options%struct_size, "options' size")
  options%sponge_width = 3
  options%device = sciproxy_c_string("cpu")
  input%model%shape = n
  input%model%spacing = 10
  input%model%vp = c_loc(vp)
  input%model%epsilon = c_loc(eps)
  input%model%delta = c_loc(delta)
  input%model%theta = c_loc(theta)
  input%dt = 0.001d0
  input%nt = nt
  input%nshots = 1
  input%nsources = 1
  input%nreceivers = nrec
  input%source_amplitudes = c_loc(amps)
  input%source_locations = c_loc(src)
  input%receiver_locations = c_loc(rec)

  status = sciproxy_tti_max_dt_f64(input, options, max_dt)
  call check(status == SCIPROXY_OK .and. max_dt > input%dt, "max_dt")
  status = sciproxy_tti_f64(input, options, out)
  call check(status == SCIPROXY_OK, "forward")
  call check(all(abs(out) <= huge(1d0)) .and. sum(out**2) > 0, "forward finite, non-zero")
  options%device = sciproxy_c_string("reference")
  status = sciproxy_tti_f64(input, options, out_ref)
  call check(status == SCIPROXY_OK .and. &
             sqrt(sum((out - out_ref)**2) / sum(out_ref**2)) <= 1d-12, "cpu against reference")
  options%device = sciproxy_c_string("cpu")
  status = sciproxy_tti_adjoint_f64(input, options, data, back)
  call check(status == SCIPROXY_OK, "adjoint")
  lhs = sum(out * data)
  rhs = sum(amps * back)
  call check(abs(lhs) > 0 .and. abs(lhs - rhs) <= 1d-10 * abs(lhs), "dot-product test")

  ! Errors: a code and a message naming the argument.
  input%dt = 1
  status = sciproxy_tti_f64(input, options, out)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "stability limit") > 0, "dt too large")
  input%dt = 0.001d0
  options%space_order = 6
  status = sciproxy_tti_f64(input, options, out)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "space_order") > 0, "bad space_order")
  options%space_order = 8
  ! One process: a process grid of more than one rank does not fit.
  options%process_grid = [1, 2, 1]
  status = sciproxy_tti_f64(input, options, out)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "process_grid") > 0, "bad process_grid")
  options%process_grid = 0
  options%struct_size = 0
  status = sciproxy_tti_f64(input, options, out)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "options.struct_size") == 1, "struct_size")

  ! The workshop demo: constant materials, a Ricker source in the middle.
  call sciproxy_tti_demo_options_default(demo_options)
  call check(demo_options%space_order == 8 .and. demo_options%form == SCIPROXY_TTI_DEMO_FUSED &
             .and. demo_options%autotune == 0 .and. demo_options%comm == SCIPROXY_NO_COMM &
             .and. all(demo_options%process_grid == 0) .and. demo_options%results == 0, &
             "demo options defaults")
  call check(c_sizeof(demo_options) == demo_options%struct_size, "demo options' size")
  demo%shape = d
  demo%spacing = 10
  demo%nt = dnt
  demo%vp = 1500
  demo%b = 1
  demo%epsilon = 0.2d0
  demo%eta = 0.4d0
  demo%f = 0.85d0
  demo%theta = 0.5d0
  demo%phi = 0.3d0
  demo%source_position = 55
  status = sciproxy_tti_demo_dt_limit_f64(demo, demo_options, limit)
  call check(status == SCIPROXY_OK .and. limit > 0, "demo dt limit")
  demo%dt = 0.5d0 * limit
  do t = 1, dnt
    a = pi * 30 * ((t - 1) * demo%dt - 1d0 / 30)
    src_wavelet(t) = (1 - 2 * a * a) * exp(-a * a)
  end do
  demo%source_amplitudes = c_loc(src_wavelet)
  demo_options%device = sciproxy_c_string("cpu")
  status = sciproxy_tti_demo_f64(demo, demo_options, u)
  call check(status == SCIPROXY_OK .and. all(abs(u) <= huge(1d0)) .and. sum(u**2) > 0, "demo")
  demo_options%device = sciproxy_c_string("reference")
  status = sciproxy_tti_demo_f64(demo, demo_options, u_ref)
  call check(status == SCIPROXY_OK .and. sqrt(sum((u - u_ref)**2) / sum(u_ref**2)) <= 1d-10, &
             "demo cpu against reference")
  demo%dt = 2 * limit
  status = sciproxy_tti_demo_f64(demo, demo_options, u)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "dt") > 0, "demo dt too large")

  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran tti: all checks passed (dot product", abs(lhs - rhs) / abs(lhs), ")"

contains

  subroutine check(condition, what)
    logical, intent(in) :: condition
    character(len=*), intent(in) :: what
    if (.not. condition) then
      print *, "check failed: ", what, " (last error: ", sciproxy_last_error_message(), ")"
      failures = failures + 1
    end if
  end subroutine

end program
