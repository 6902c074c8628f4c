! The Fortran modules of an installed sciproxy: a hand-checked parstack, and one diffusion step
! on a small generated grid (module sciproxy_diffusion).
program downstream_fortran
  use, intrinsic :: iso_c_binding
  use sciproxy
  use sciproxy_diffusion
  implicit none
  real(c_double) :: traces(3, 2), weights(2, 2), result(4, 2)
  integer(c_int32_t) :: offsets(2), shifts(2, 2), offsetout
  integer(c_int64_t) :: lengthout
  integer :: status
  type(c_ptr) :: grid, diffusion
  real(c_double), target :: w(20, 3), vn(30, 2), exner(20, 2), theta_v(20, 2), diagnostic(20, 3, 4)

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

  status = sciproxy_diffusion_grid_icosahedral(1, 0, grid)  ! 20 cells, 30 edges
  if (status == SCIPROXY_OK) status = sciproxy_diffusion_init_computed(grid, num_levels=2, &
                                                                        handle=diffusion)
  w = 0
  vn = 1
  exner = 0.8d0
  theta_v = 300
  diagnostic = 0
  if (status == SCIPROXY_OK) &
    status = sciproxy_diffusion_run(diffusion, w, vn, exner, theta_v, diagnostic(:, :, 1), &
                                    diagnostic(:, :, 2), diagnostic(:, :, 3), diagnostic(:, :, 4), &
                                    100d0, .true.)
  if (status /= SCIPROXY_OK) then
    print *, "downstream_fortran: ", sciproxy_last_error_message()
    error stop 1
  end if
  call sciproxy_diffusion_free(diffusion)
  call sciproxy_diffusion_grid_free(grid)
  print *, "downstream_fortran: diffusion OK"
end program
