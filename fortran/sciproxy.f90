! sciproxy Fortran module: iso_c_binding interfaces to the C ABI (include/sciproxy/sciproxy.h) and
! convenience wrappers for traces of equal length held in one array traces(nsamples, ntraces).
! Column-major shifts(ntraces, nshifts) is the C ABI's row-major (nshifts, ntraces): no copies.
module sciproxy
  use, intrinsic :: iso_c_binding
  implicit none
  private

  integer, parameter, public :: SCIPROXY_OK = 0

  public :: sciproxy_parstack, sciproxy_parstack_window, sciproxy_last_error_message

  interface
    function c_parstack_extent_f64(traces, lengths, ntraces, offsets, shifts, nshifts, offsetout, &
                                   lengthout) bind(C, name="sciproxy_parstack_extent_f64") result(status)
      import :: c_ptr, c_int64_t, c_int32_t, c_int
      type(c_ptr), intent(in) :: traces(*)
      integer(c_int64_t), intent(in) :: lengths(*)
      integer(c_int64_t), value :: ntraces, nshifts
      integer(c_int32_t), intent(in) :: offsets(*), shifts(*)
      integer(c_int32_t), intent(inout) :: offsetout
      integer(c_int64_t), intent(inout) :: lengthout
      integer(c_int) :: status
    end function

    function c_parstack_f64(traces, lengths, ntraces, offsets, shifts, weights, nshifts, method, &
                            offsetout, lengthout, result, result_size, accumulate, clamp, nparallel, &
                            device) bind(C, name="sciproxy_parstack_f64") result(status)
      import :: c_ptr, c_int64_t, c_int32_t, c_int, c_double, c_char
      type(c_ptr), intent(in) :: traces(*)
      integer(c_int64_t), intent(in) :: lengths(*)
      integer(c_int64_t), value :: ntraces, nshifts, result_size
      integer(c_int32_t), intent(in) :: offsets(*), shifts(*)
      real(c_double), intent(in) :: weights(*)
      integer(c_int), value :: method, accumulate, clamp, nparallel
      integer(c_int32_t), intent(inout) :: offsetout
      integer(c_int64_t), intent(inout) :: lengthout
      real(c_double), intent(inout) :: result(*)
      character(kind=c_char), intent(in) :: device(*)
      integer(c_int) :: status
    end function

    function c_last_error() bind(C, name="sciproxy_last_error") result(message)
      import :: c_ptr
      type(c_ptr) :: message
    end function

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
  end interface

contains

  ! Pointers to each column of traces(nsamples, ntraces), the form the C ABI takes.
  subroutine trace_pointers(traces, pointers, lengths)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    type(c_ptr), intent(out) :: pointers(:)
    integer(c_int64_t), intent(out) :: lengths(:)
    integer :: i
    do i = 1, size(traces, 2)
      pointers(i) = c_loc(traces(1, i))
      lengths(i) = size(traces, 1, kind=c_int64_t)
    end do
  end subroutine

  ! The default output window (pyrocko's): offsetout and lengthout of the full stack.
  function sciproxy_parstack_window(traces, offsets, shifts, offsetout, lengthout) result(status)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    integer(c_int32_t), intent(in) :: offsets(:), shifts(:, :)
    integer(c_int32_t), intent(out) :: offsetout
    integer(c_int64_t), intent(out) :: lengthout
    integer :: status
    type(c_ptr) :: pointers(size(traces, 2))
    integer(c_int64_t) :: lengths(size(traces, 2))
    call trace_pointers(traces, pointers, lengths)
    offsetout = 0
    lengthout = -1
    status = c_parstack_extent_f64(pointers, lengths, size(traces, 2, kind=c_int64_t), offsets, &
                                   shifts, size(shifts, 2, kind=c_int64_t), offsetout, lengthout)
  end function

  ! result(lengthout, nshifts) for method 0, result(1, nshifts) for method 1.
  ! lengthout < 0 on entry asks for the default window; offsetout and lengthout then receive it.
  function sciproxy_parstack(traces, offsets, shifts, weights, method, offsetout, lengthout, result, &
                             device, accumulate, nparallel) result(status)
    real(c_double), intent(in), target, contiguous :: traces(:, :)
    integer(c_int32_t), intent(in) :: offsets(:), shifts(:, :)
    real(c_double), intent(in) :: weights(:, :)
    integer, intent(in) :: method
    integer(c_int32_t), intent(inout) :: offsetout
    integer(c_int64_t), intent(inout) :: lengthout
    real(c_double), intent(inout), contiguous :: result(:, :)
    character(len=*), intent(in), optional :: device
    logical, intent(in), optional :: accumulate
    integer, intent(in), optional :: nparallel
    integer :: status
    type(c_ptr) :: pointers(size(traces, 2))
    integer(c_int64_t) :: lengths(size(traces, 2))
    character(len=:, kind=c_char), allocatable :: c_device
    integer(c_int) :: c_accumulate, c_threads
    call trace_pointers(traces, pointers, lengths)
    c_device = "auto" // c_null_char
    if (present(device)) c_device = trim(device) // c_null_char
    c_accumulate = 0
    if (present(accumulate)) then
      if (accumulate) c_accumulate = 1
    end if
    c_threads = 0
    if (present(nparallel)) c_threads = nparallel
    status = c_parstack_f64(pointers, lengths, size(traces, 2, kind=c_int64_t), offsets, shifts, &
                            weights, size(shifts, 2, kind=c_int64_t), int(method, c_int), offsetout, &
                            lengthout, result, size(result, kind=c_int64_t), c_accumulate, 0_c_int, &
                            c_threads, c_device)
  end function

  function sciproxy_last_error_message() result(message)
    character(len=:), allocatable :: message
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: n, i
    p = c_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: message)
    do i = 1, n
      message(i:i) = chars(i)
    end do
  end function

end module sciproxy
