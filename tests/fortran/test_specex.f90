! The specex family from Fortran: the PSF handle (path as the first command-line argument), the
! wavelength grid, five spectra projected onto the CCD and extracted back, the options' defaults,
! and bad input (nspec not a multiple of bundlesize, a wrong struct_size, a missing file).
program test_specex
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  integer, parameter :: nspec = 5, nwave = 31
  character(len=1024) :: path
  type(c_ptr) :: psf
  type(sciproxy_specex_psf_info) :: info
  type(sciproxy_specex_input) :: input
  type(sciproxy_specex_options) :: options
  type(sciproxy_specex_frame_input) :: frame
  real(c_double), target :: wave(nwave), phot(nwave, nspec)
  real(c_double), target, allocatable :: image(:, :), ivar(:, :)
  real(c_double) :: flux(nwave, nspec), fivar(nwave, nspec), w2(2), x(2), y(2), back(2)
  real(c_double), allocatable :: resolution(:, :, :)
  integer(c_int64_t) :: n, range(4), npatches, nx, ny
  integer(c_int32_t) :: ndiag
  real(c_double) :: rowsum(nspec)
  integer :: status, failures, k

  failures = 0
  call get_command_argument(1, path)
  if (len_trim(path) == 0) path = "psf-r0-00067784.fits"

  ! The options' defaults.
  call sciproxy_specex_options_default(options)
  call check(options%struct_size > 0 .and. options%bundlesize == 25 .and. &
             options%nsubbundles == 1 .and. options%wavesize == 50 .and. options%psferr < 0 &
             .and. options%full_output == 1 .and. options%comm == -1 .and. &
             options%result_layout == 1, "options defaults")
  call check(c_sizeof(options) == options%struct_size, "options' size")

  ! The grid: numpy's arange(6000, 6030 + 0.5, 1).
  status = sciproxy_specex_wavelength_grid(6000d0, 6030d0, 1d0, size=0_c_int64_t, n=n)
  call check(status == SCIPROXY_OK .and. n == nwave, "grid size")
  status = sciproxy_specex_wavelength_grid(6000d0, 6030d0, 1d0, wave, int(nwave, c_int64_t), n)
  call check(status == SCIPROXY_OK .and. wave(1) == 6000d0 .and. wave(nwave) == 6030d0, "grid")
  status = sciproxy_specex_wavelength_grid(6000d0, 6030d0, -1d0, size=0_c_int64_t, n=n)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "dw") > 0, "grid: bad step")

  ! Loading: a missing file, then the PSF.
  status = sciproxy_specex_psf_load("/no/such/psf.fits"//c_null_char, psf)
  call check(status /= SCIPROXY_OK .and. .not. c_associated(psf), "missing PSF")
  call check(index(sciproxy_last_error_message(), "/no/such/psf.fits") > 0, "missing PSF message")
  status = sciproxy_specex_psf_load(trim(path)//c_null_char, psf)
  if (status /= SCIPROXY_OK) then
    print *, "cannot load ", trim(path), ": ", sciproxy_last_error_message()
    error stop 1
  end if
  status = sciproxy_specex_psf_get_info(psf, info)
  call check(status == SCIPROXY_OK .and. info%nspec == 500 .and. info%npix_x == 4114 .and. &
             info%npix_y == 4128 .and. info%version == 3, "PSF info")
  w2 = [6000d0, 6500d0]
  status = sciproxy_specex_psf_xy(psf, 0_c_int32_t, w2, 2_c_int64_t, x, y)
  call check(status == SCIPROXY_OK .and. y(2) > y(1) .and. x(1) > 0, "trace")
  status = sciproxy_specex_psf_wavelength(psf, 0_c_int32_t, y, 2_c_int64_t, back)
  call check(status == SCIPROXY_OK .and. all(abs(back - w2) < 0.05d0), "inverse trace")

  ! Five spectra of 100 photons per bin, projected onto their pixels without noise, extracted.
  phot = 100
  status = sciproxy_specex_psf_xyrange(psf, 0_c_int32_t, int(nspec + 1, c_int32_t), 5980d0, &
                                       6050d0, range)
  call check(status == SCIPROXY_OK, "xyrange")
  nx = range(2) - range(1)
  ny = range(4) - range(3)
  allocate (image(nx, ny), ivar(nx, ny))
  status = sciproxy_specex_project(psf, wave, int(nwave, c_int64_t), phot, 0_c_int32_t, &
                                   int(nspec, c_int32_t), range, 0_c_int, image, nx * ny)
  call check(status == SCIPROXY_OK .and. sum(image) > 0.9d0 * 100 * nspec * nwave, "project")
  ivar = 1
  input%psf = psf
  input%image = c_loc(image)
  input%ivar = c_loc(ivar)
  input%ny = ny
  input%nx = nx
  input%has_range = 1
  input%xmin = range(1)
  input%xmax = range(2)
  input%ymin = range(3)
  input%ymax = range(4)
  input%specmin = 0
  input%nspec = nspec
  input%wavelengths = c_loc(wave)
  input%nwave = nwave
  options%device = sciproxy_c_string("cpu")
  options%bundlesize = 5
  options%wavesize = 10
  status = sciproxy_specex_ex2d_shape(input, options, ndiag, npatches)
  call check(status == SCIPROXY_OK .and. ndiag >= 1 .and. npatches == 4, "ex2d shape")
  allocate (resolution(nwave, 2 * ndiag + 1, nspec))
  status = sciproxy_specex_ex2d(input, options, flux, fivar, resolution, &
                                int(size(resolution), c_int64_t), ndiag=ndiag)
  call check(status == SCIPROXY_OK, "ex2d")
  ! Inside the grid (the edge bins see the zeros beyond it) the noise-free solution is the truth.
  call check(maxval(abs(flux(3:nwave - 2, :) - 100)) < 0.5d0 .and. all(fivar > 0), "ex2d flux")
  ! R's rows sum to 1: row j of a spectrum is resolution(j + ndiag - k, k, :), k = 0 .. 2 ndiag
  ! (C's k), that is resolution(16 + ndiag - (k - 1), k, :) here for row 16.
  rowsum = 0
  do k = 1, 2 * ndiag + 1
    rowsum = rowsum + resolution(16 + ndiag - (k - 1), k, :)
  end do
  call check(all(abs(rowsum - 1) < 1d-3), "resolution rows sum to 1 (within the band)")

  ! Bad input, each refused with a message naming it.
  input%nspec = 7
  status = sciproxy_specex_ex2d(input, options, flux, fivar, resolution_size=0_c_int64_t)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "bundlesize") > 0, "nspec not a multiple")
  input%nspec = nspec
  options%struct_size = options%struct_size - 8
  status = sciproxy_specex_ex2d(input, options, flux, fivar, resolution_size=0_c_int64_t)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "options.struct_size") == 1, "struct_size")
  call sciproxy_specex_options_default(options)
  options%bundlesize = 5
  status = sciproxy_specex_ex2d(input, options, flux, fivar, resolution, 3_c_int64_t)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "resolution_size") == 1, "resolution_size")
  frame%image_path = sciproxy_c_string("/no/such/preproc.fits")
  frame%psf_path = sciproxy_c_string(trim(path))
  frame%frame_path = sciproxy_c_string("frame-fortran-never-written.fits")
  frame%wmin = 6000
  frame%wmax = 6030
  frame%dw = 1
  frame%nspec = 5
  status = sciproxy_specex_extract_frame(frame, options)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "/no/such/preproc.fits") > 0, "missing image")

  call sciproxy_specex_psf_free(psf)
  ! A main program's arrays live to its end; freed here so that LeakSanitizer sees none left.
  deallocate (resolution)
  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran specex: all checks passed"

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
