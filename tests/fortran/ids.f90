!> ids: every realisation id is computed exactly once, through the soslb module.
!>
!> Usage: ids total [config [step]]. Runs the loop of DESIGN §3; each
!> realisation records its (1-based) id and waits about 0.5 ms (usleep, so
!> that oversubscribed ranks do not burn the cores), 2 ms on ranks >= 4 once
!> `step` seconds have passed since init (a slowdown after the warm-up, which
!> only the SOS/AID help can absorb). Rank 0 gathers every id with
!> MPI_Gatherv and prints
!>    ids: total=N computed=C missing=M duplicates=D min_id=A max_id=B
program ids
   use, intrinsic :: iso_c_binding, only: c_int
   use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit
   use mpi
   use soslb
   implicit none

   interface
      integer(c_int) function usleep(us) bind(C, name='usleep')
         import :: c_int
         integer(c_int), value :: us
      end function usleep
   end interface

   type(soslb_t) :: lb
   integer(int64) :: total, first, last, k
   integer(int64), allocatable :: mine(:), all(:), tmp(:)
   integer, allocatable :: counts(:), displs(:), seen(:)
   character(len=4096) :: config, arg
   real(real64) :: step, start
   integer :: ierr, mpierr, rank, nranks, n, i
   integer(c_int) :: wait

   call MPI_Init(mpierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
   call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
   call get_command_argument(1, arg)
   read (arg, *) total
   config = ''
   if (command_argument_count() >= 2) call get_command_argument(2, config)
   step = huge(step)
   if (command_argument_count() >= 3) then
      call get_command_argument(3, arg)
      read (arg, *) step
   end if

   allocate (mine(1024))
   n = 0
   call soslb_init(lb, MPI_COMM_WORLD, total, ierr, config=config)
   call check('soslb_init')
   start = MPI_Wtime()
   do while (soslb_next(lb, first, last, ierr))
      do k = first, last
         if (n == size(mine)) then
            allocate (tmp(2 * n))
            tmp(1:n) = mine
            call move_alloc(tmp, mine)
         end if
         n = n + 1
         mine(n) = k
         wait = 500
         if (rank >= 4) then
            if (MPI_Wtime() - start > step) wait = 2000
         end if
         i = usleep(wait)
      end do
   end do
   call check('soslb_next')
   call soslb_finalize(lb, ierr)
   call check('soslb_finalize')

   allocate (counts(nranks), displs(nranks))
   call MPI_Gather(n, 1, MPI_INTEGER, counts, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, mpierr)
   displs = 0
   do i = 2, nranks
      displs(i) = displs(i - 1) + counts(i - 1)
   end do
   allocate (all(merge(sum(counts), 0, rank == 0)))
   call MPI_Gatherv(mine, n, MPI_INTEGER8, all, counts, displs, MPI_INTEGER8, 0, MPI_COMM_WORLD, mpierr)
   if (rank == 0) then
      allocate (seen(total))
      seen = 0
      do i = 1, size(all)
         if (all(i) >= 1 .and. all(i) <= total) seen(all(i)) = seen(all(i)) + 1
      end do
      write (*, '(6(a,i0))') 'ids: total=', total, ' computed=', size(all), ' missing=', count(seen == 0), &
         ' duplicates=', sum(max(seen - 1, 0)), ' min_id=', minval(all), ' max_id=', maxval(all)
   end if
   call MPI_Finalize(mpierr)

contains

   subroutine check(what)
      character(len=*), intent(in) :: what
      if (ierr /= SOSLB_OK) then
         write (error_unit, '(a,i0,a,i0,a)') 'ids: rank ', rank, ': ' // what // ' failed (ierr=', ierr, &
            '): ' // soslb_error_message()
         stop 1   ! not MPI_Abort: MPICH's mpiexec may drop what an aborting rank wrote
      end if
   end subroutine check

end program ids
