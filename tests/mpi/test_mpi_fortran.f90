! The Fortran module under mpiexec: sciproxy_parstack with comm=MPI_COMM_WORLD gives every rank
! the one-process result bit for bit. Exit status 1 when any rank fails.
program test_mpi_fortran
  use, intrinsic :: iso_c_binding
  use mpi
  use sciproxy
  implicit none
  real(c_double) :: traces(50, 3), weights(3, 7), expected(200, 7), result(200, 7)
  integer(c_int32_t) :: offsets(3), shifts(3, 7), offsetout
  integer(c_int64_t) :: lengthout
  integer :: ierr, rank, nranks, status, i, j, failures, worst

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
