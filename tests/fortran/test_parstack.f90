! The Fortran module against a hand-computed stack, and an error that names its argument.
program test_parstack
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  real(c_double) :: traces(3, 2), weights(2, 2), result(4, 2), wrong(3, 2)
  integer(c_int32_t) :: offsets(2), shifts(2, 2), offsetout
  integer(c_int64_t) :: lengthout
  integer :: status, failures

  failures = 0
  traces(:, 1) = [1d0, 2d0, 3d0]
  traces(:, 2) = [-1d0, -2d0, -3d0]
  offsets = [0, 1]
  shifts(:, 1) = [0, 0]
  shifts(:, 2) = [1, -1]
  weights = 1d0

  status = sciproxy_parstack_window(traces, offsets, shifts, offsetout, lengthout)
  if (status /= SCIPROXY_OK .or. offsetout /= 0 .or. lengthout /= 4) failures = failures + 1

  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, result, device="cpu")
  if (status /= SCIPROXY_OK) failures = failures + 1
  if (any(result(:, 1) /= [1d0, 1d0, 1d0, -3d0]) .or. any(result(:, 2) /= [-1d0, -1d0, -1d0, 3d0])) then
    print *, "wrong stack:", result
    failures = failures + 1
  end if

  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, wrong)
  if (status == SCIPROXY_OK .or. index(sciproxy_last_error_message(), "result: expected") /= 1) then
    print *, "expected an error naming result, got: ", sciproxy_last_error_message()
    failures = failures + 1
  end if

  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran: all checks passed"
end program
