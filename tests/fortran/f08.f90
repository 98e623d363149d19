!> f08: soslb from a program that uses the mpi_f08 module, on a communicator
!> of its own (the two halves of MPI_COMM_WORLD, from MPI_Comm_split), passed
!> as comm%MPI_VAL; Open MPI and MPICH convert that handle differently.
!>
!> Usage: f08 case. Cases:
!>    split   each half balances `total` = 300 realisations; rank 0 of each
!>            half prints  f08: half=H ranks=R total=N computed=C duplicates=D
!>    null    MPI_COMM_NULL%MPI_VAL: rank 0 prints  f08: case=null ierr=E message=M
!>    bad     12345, no communicator's handle: the same, case=bad
program f08
   use, intrinsic :: iso_fortran_env, only: int64
   use mpi_f08
   use soslb
   implicit none

   integer(int64), parameter :: total = 300
   type(MPI_Comm) :: half
   type(soslb_t) :: lb
   integer(int64) :: first, last, k, computed, duplicates
   integer, allocatable :: seen(:), all(:)
   character(len=32) :: name
   integer :: ierr, rank, size, hrank, hsize, colour

   call MPI_Init()
   call MPI_Comm_rank(MPI_COMM_WORLD, rank)
   call MPI_Comm_size(MPI_COMM_WORLD, size)
   call get_command_argument(1, name)

   select case (trim(name))
   case ('split')
      colour = merge(0, 1, rank < size / 2)
      call MPI_Comm_split(MPI_COMM_WORLD, colour, rank, half)
      call MPI_Comm_rank(half, hrank)
      call MPI_Comm_size(half, hsize)
      allocate (seen(total), all(total))
      seen = 0
      call soslb_init(lb, half%MPI_VAL, total, ierr)
      call check('soslb_init')
      do while (soslb_next(lb, first, last, ierr))
         do k = first, last
            seen(k) = seen(k) + 1
         end do
      end do
      call check('soslb_next')
      call soslb_finalize(lb, ierr)
      call check('soslb_finalize')
      ! Counted over the half, from the ids each rank computed.
      call MPI_Reduce(seen, all, int(total), MPI_INTEGER, MPI_SUM, 0, half)
      if (hrank == 0) then
         computed = count(all > 0)
         duplicates = sum(max(all - 1, 0))
         write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0)') 'f08: half=', colour, ' ranks=', hsize, &
            ' total=', total, ' computed=', computed, ' duplicates=', duplicates
      end if
      call MPI_Comm_free(half)
   case ('null')
      call soslb_init(lb, MPI_COMM_NULL%MPI_VAL, total, ierr)
      if (rank == 0) write (*, '(a,i0,2a)') 'f08: case=null ierr=', ierr, ' message=', soslb_error_message()
   case ('bad')
      call soslb_init(lb, 12345, total, ierr)
      if (rank == 0) write (*, '(a,i0,2a)') 'f08: case=bad ierr=', ierr, ' message=', soslb_error_message()
   case default
      if (rank == 0) write (*, '(a)') 'f08: unknown case ' // trim(name)
      stop 2
   end select
   call MPI_Finalize()

contains

   subroutine check(what)
      character(len=*), intent(in) :: what
      if (ierr /= SOSLB_OK) then
         write (*, '(a,i0,3a,i0,2a)') 'f08: rank ', rank, ': ', what, ' failed, ierr=', ierr, &
            ': ', soslb_error_message()
         stop 1
      end if
   end subroutine check

end program f08
