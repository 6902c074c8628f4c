! The Fortran module of an installed sciproxy: a hand-checked parstack.
program downstream_fortran
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  real(c_double) :: traces(3, 2), weights(2, 2), result(4, 2)
  integer(c_int32_t) :: offsets(2), shifts(2, 2), offsetout
  integer(c_int64_t) :: lengthout
  integer :: status

  traces(:, 1) = [1d0, 2d0, 3d0]
  traces(:, 2) = [-1d0, -2d0, -3d0]
  offsets = [0, 1]
  shifts(:, 1) = [0, 0]
  shifts(:, 2) = [1, -1]
  weights = 1d0
  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, result, &
                             device="cpu")
  if (status /= SCIPROXY_OK) then
    print *, "downstream_fortran: ", sciproxy_last_error_message()
    error stop 1
  end if
  if (any(result(:, 1) /= [1d0, 1d0, 1d0, -3d0]) .or. any(result(:, 2) /= [-1d0, -1d0, -1d0, 3d0])) then
    print *, "downstream_fortran: wrong stack:", result
    error stop 1
  end if
  print *, "downstream_fortran: parstack OK"
end program
