! The wave family from Fortran: the 2-D forward run of the C test (tests/capi/test_capi_wave.c)
! on cpu and reference (relative 1e-12), float32 against float64 (1e-4), the source gradient
! against the loss (the data are linear in the source amplitudes: relative 1e-8), the options'
! defaults, and errors that name their argument.
program test_wave
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  integer, parameter :: nz = 24, nx = 30, nt = 60, nshots = 2, nrec = 5
  real(c_double), parameter :: pi = 3.14159265358979323846d0, dt = 0.001d0
  ! C's [nz, nx] model is v(nx, nz) here; [nshots, n, nt] data are (nt, n, nshots).
  real(c_double), target :: v(nx, nz), amps(nt, 1, nshots), out_cpu(nt, nrec, nshots), &
                            out_ref(nt, nrec, nshots), weights(nt, nrec, nshots), &
                            grad_v(nx, nz), grad_src(nt, 1, nshots)
  real(c_float), target :: v32(nx, nz), amps32(nt, 1, nshots), out32(nt, nrec, nshots)
  integer(c_int64_t), target :: src(2, 1, nshots), rec(2, nrec, nshots)
  type(sciproxy_scalar_input) :: input, input32
  type(sciproxy_scalar_options) :: options
  integer :: status, failures, z, x, s, r, t
  real(c_double) :: a, loss, predicted

  failures = 0
  do z = 1, nz
    do x = 1, nx
      if (z - 1 < nz / 2) then
        v(x, z) = 1500
      else
        v(x, z) = 2000 + 10 * (x - 1)
      end if
    end do
  end do
  do s = 1, nshots
    do t = 1, nt  ! 25 Hz Ricker, peak at 0.04 s
      a = pi * 25 * ((t - 1) * dt - 0.04d0)
      amps(t, 1, s) = (1 - 2 * a * a) * exp(-a * a)
    end do
    src(:, 1, s) = [2, 8 + 10 * (s - 1)]
    do r = 1, nrec
      rec(:, r, s) = [1, 3 + 6 * (r - 1)]
    end do
  end do

  input%ndim = 2
  input%shape(1:2) = [nz, nx]
  input%spacing(1:2) = [5d0, 5d0]
  input%v = c_loc(v)
  input%nmodels = 1
  input%dt = dt
  input%nt = nt
  input%nshots = nshots
  input%nsources = 1
  input%nreceivers = nrec
  input%source_amplitudes = c_loc(amps)
  input%source_locations = c_loc(src)
  input%receiver_locations = c_loc(rec)

  call sciproxy_scalar_options_default(options)
  ! The bind(c) type has the C struct's layout: its size is the library's struct_size.
  call check(c_sizeof(options) == options%struct_size .and. options%autotune == 0, &
             "scalar options' size")
  call check(options%struct_size > 0 .and. options%accuracy == 4 .and. &
             all(options%pml_width == 20) .and. all(options%survey_pad == -1) .and. &
             options%pml_freq == 25 .and. options%storage == SCIPROXY_STORAGE_DEVICE, &
             "options defaults")
  options%pml_width = 6
  options%device = sciproxy_c_string("cpu")
  status = sciproxy_scalar_f64(input, options, receiver_amplitudes=out_cpu)
  call check(status == SCIPROXY_OK, "forward cpu")
  options%device = sciproxy_c_string("reference")
  status = sciproxy_scalar_f64(input, options, receiver_amplitudes=out_ref)
  call check(status == SCIPROXY_OK, "forward reference")
  call check(all(ieee_finite(out_cpu)) .and. sum(out_ref**2) > 0, "finite, non-zero")
  call check(sqrt(sum((out_cpu - out_ref)**2) / sum(out_ref**2)) < 1d-12, "cpu against reference")

  ! float32 against float64.
  v32 = real(v, c_float)
  amps32 = real(amps, c_float)
  input32 = input
  input32%v = c_loc(v32)
  input32%source_amplitudes = c_loc(amps32)
  options%device = sciproxy_c_string("cpu")
  status = sciproxy_scalar_f32(input32, options, receiver_amplitudes=out32)
  call check(status == SCIPROXY_OK, "forward float32")
  call check(sqrt(sum((real(out32, c_double) - out_ref)**2) / sum(out_ref**2)) < 1d-4, &
             "float32 against float64")

  ! The source gradient of loss = <weights, receivers>: the data are linear in the amplitudes.
  weights = reshape([(sin(0.37d0 * t) + 0.1d0, t = 0, nt * nrec * nshots - 1)], shape(weights))
  status = sciproxy_scalar_gradient_f64(input, options, grad_receiver_amplitudes=weights, &
                                        grad_v=grad_v, grad_source_amplitudes=grad_src)
  call check(status == SCIPROXY_OK, "gradient")
  loss = sum(weights * out_cpu)
  predicted = sum(grad_src * amps)
  call check(abs(loss - predicted) <= 1d-8 * abs(loss), "source gradient against the loss")
  call check(any(grad_v /= 0), "velocity gradient non-zero")

  ! Errors: a code and a message naming the argument.
  options%accuracy = 5
  status = sciproxy_scalar_f64(input, options, receiver_amplitudes=out_cpu)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "accuracy") > 0, "bad accuracy")
  options%accuracy = 4
  input%ndim = 4
  status = sciproxy_scalar_f64(input, options, receiver_amplitudes=out_cpu)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "ndim") == 1, "bad ndim")
  input%ndim = 2
  options%struct_size = options%struct_size + 8
  status = sciproxy_scalar_f64(input, options, receiver_amplitudes=out_cpu)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "options.struct_size") == 1, "struct_size")

  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran wave: all checks passed"

contains

  elemental logical function ieee_finite(x)
    real(c_double), intent(in) :: x
    ieee_finite = x == x .and. abs(x) <= huge(x)
  end function

  subroutine check(condition, what)
    logical, intent(in) :: condition
    character(len=*), intent(in) :: what
    if (.not. condition) then
      print *, "check failed: ", what, " (last error: ", sciproxy_last_error_message(), ")"
      failures = failures + 1
    end if
  end subroutine

end program
