! The stack family from Fortran: the convenience wrappers against a hand-computed stack, the C
! functions with the options struct (its defaults, a wrong struct_size), argmax, recording, and
! errors that name their argument.
program test_stack
  use, intrinsic :: iso_c_binding
  use sciproxy
  implicit none
  real(c_double), target :: traces(3, 2), weights(2, 2), result(4, 2), wrong(3, 2), grid(2, 2)
  integer(c_int32_t), target :: offsets(2), shifts(2, 2), offsetout, where(2)
  integer(c_int64_t), target :: lengthout, lengths(2)
  type(c_ptr), target :: pointers(2)
  type(sciproxy_parstack_input) :: input
  type(sciproxy_parstack_options) :: options
  type(sciproxy_argmax_input) :: ain
  type(sciproxy_argmax_options) :: aopt
  character(len=:), allocatable :: json
  integer :: status, failures

  failures = 0
  traces(:, 1) = [1d0, 2d0, 3d0]
  traces(:, 2) = [-1d0, -2d0, -3d0]
  offsets = [0, 1]
  shifts(:, 1) = [0, 0]
  shifts(:, 2) = [1, -1]
  weights = 1d0

  ! The wrappers for traces of equal length.
  status = sciproxy_parstack_window(traces, offsets, shifts, offsetout, lengthout)
  call check(status == SCIPROXY_OK .and. offsetout == 0 .and. lengthout == 4, "window")
  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, result, &
                             device="cpu")
  call check(status == SCIPROXY_OK, "parstack status")
  call check(all(result(:, 1) == [1d0, 1d0, 1d0, -3d0]) .and. &
             all(result(:, 2) == [-1d0, -1d0, -1d0, 3d0]), "parstack numbers")
  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, wrong)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "result: expected") == 1, "result too small")

  ! The C function with its structs: the defaults, then method 1 (the maximum of each stack).
  call sciproxy_parstack_options_default(options)
  call check(options%struct_size > 0 .and. options%method == 0 .and. options%lengthout == -1 &
             .and. options%nparallel == 0 .and. options%autotune == 0, "parstack options defaults")
  ! The bind(c) type has the C struct's layout: its size is the library's struct_size.
  call check(c_sizeof(options) == options%struct_size, "parstack options' size")
  pointers = [c_loc(traces(1, 1)), c_loc(traces(1, 2))]
  lengths = 3
  input%traces = c_loc(pointers)
  input%lengths = c_loc(lengths)
  input%ntraces = 2
  input%offsets = c_loc(offsets)
  input%shifts = c_loc(shifts)
  input%weights = c_loc(weights)
  input%nshifts = 2
  options%method = 1
  options%device = sciproxy_c_string("reference")
  status = sciproxy_parstack_f64(input, options, result, 2_c_int64_t)
  call check(status == SCIPROXY_OK .and. result(1, 1) == 1d0 .and. result(2, 1) == 3d0, &
             "parstack method 1")
  ! A struct_size this library does not know: refused, naming it.
  options%struct_size = options%struct_size - 4
  status = sciproxy_parstack_f64(input, options, result, 2_c_int64_t)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "options.struct_size") == 1, "struct_size")
  ! A device that does not exist.
  call sciproxy_parstack_options_default(options)
  options%device = sciproxy_c_string("abacus")
  status = sciproxy_parstack_f64(input, options, result, 8_c_int64_t)
  call check(status == SCIPROXY_ERROR_INVALID_ARGUMENT .and. &
             index(sciproxy_last_error_message(), "device") == 1, "bad device")

  ! argmax of C's [2, 2] = Fortran grid(2, 2) transposed: rows are grid's second index.
  grid(:, 1) = [-1d0, 2d0]
  grid(:, 2) = [-0.5d0, 3d0]
  ain%a = c_loc(grid)
  ain%rows = 2
  ain%cols = 2
  call sciproxy_argmax_options_default(aopt)
  status = sciproxy_argmax_f64(ain, aopt, where)
  call check(status == SCIPROXY_OK .and. all(where == [1, 1]), "argmax")
  aopt%pyrocko_compat = 1
  status = sciproxy_argmax_f64(ain, aopt, where)
  call check(status == SCIPROXY_OK .and. all(where == [0, 1]), "argmax pyrocko_compat")

  ! Recording: begin, a call, end, the reports as JSON; a second end is refused.
  call check(sciproxy_recording_begin(0) == SCIPROXY_OK, "recording begin")
  call check(sciproxy_recording_json_string() == "[]", "empty recording")
  call check(sciproxy_recording_begin(0) == SCIPROXY_ERROR_RUNTIME, "nested begin refused")
  lengthout = -1
  status = sciproxy_parstack(traces, offsets, shifts, weights, 0, offsetout, lengthout, result, &
                             device="cpu")
  call check(sciproxy_recording_end() == SCIPROXY_OK, "recording end")
  call check(sciproxy_recording_end() == SCIPROXY_ERROR_RUNTIME, "end without begin refused")
  json = sciproxy_recording_json_string()
  call check(json(1:1) == "[" .and. json(len(json):len(json)) == "]", "recording json")
  print *, "fortran stack: reports recorded by one parstack call:", sciproxy_recording_count()
  call check(len(sciproxy_version_string()) > 0, "version")

  if (failures /= 0) then
    print *, failures, " checks failed"
    error stop 1
  end if
  print *, "fortran stack: all checks passed"

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
