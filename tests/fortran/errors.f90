!> errors: bad input to the soslb module gives its code and a message.
!>
!> Usage: errors case [config]. Rank 0 prints
!>    case=<case> ierr=<code> message=<text>
!>    ranks_with_code=<n> code_name=<SOSLB_ERR_* parameter equal to the code>
!> and the program finalizes MPI cleanly. Cases: total0, negative,
!> unknown-field, unreadable, bad-value (init with the config argument),
!> env-typo (init with a good total), after-finalize (soslb_next
!> after a whole run), absent-ierr (total 0 without ierr: a fatal error),
!> finalize-twice (a second soslb_finalize: an error that leaves `mean` and
!> `count` untouched; the first one's count is checked), fresh-message (an
!> error, then a successful init: the message is empty again, and so after
!> an error found in Fortran and a successful soslb_next), stop (rank 1
!> calls soslb_stop after its first chunk: every rank ends, and finalize
!> counts fewer realisations than the total, all of them in `computed`),
!> add-twice (rank 1 adds two values per realisation, one call each: an
!> error on every rank once it has added more than it was handed out),
!> finalize-sizes (rank 0 alone gives `mean` and `std_error` of different
!> sizes: its error, left untouched; rank 0 also prints
!> `others_ok=<ranks that finalised with the right count>`).
program errors
   use, intrinsic :: iso_fortran_env, only: int64, real64
   use mpi
   use soslb
   implicit none

   type(soslb_t) :: lb
   character(len=64) :: name
   character(len=4096) :: config
   integer(int64) :: first, last, count
   real(real64) :: mean(1), wide(2)
   integer(int64), allocatable :: computed(:)
   integer :: ierr, mpierr, rank, same, ranks

   call MPI_Init(mpierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
   call get_command_argument(1, name)
   config = ''
   if (command_argument_count() >= 2) call get_command_argument(2, config)

   select case (trim(name))
   case ('total0')
      call soslb_init(lb, MPI_COMM_WORLD, 0, ierr)
   case ('negative')
      call soslb_init(lb, MPI_COMM_WORLD, -5_int64, ierr)
   case ('unknown-field', 'unreadable', 'bad-value')
      call soslb_init(lb, MPI_COMM_WORLD, 100, ierr, config=config)
   case ('env-typo')
      call soslb_init(lb, MPI_COMM_WORLD, 100, ierr)
   case ('after-finalize')
      call soslb_init(lb, MPI_COMM_WORLD, 100, ierr)
      if (ierr /= SOSLB_OK) call report()
      do while (soslb_next(lb, first, last, ierr))
      end do
      if (ierr /= SOSLB_OK) call report()
      call soslb_finalize(lb, ierr)
      if (ierr /= SOSLB_OK) call report()
      if (soslb_next(lb, first, last, ierr)) ierr = -1   ! a chunk after finalize: wrong too
   case ('finalize-twice')
      call compute_ids()
      call soslb_finalize(lb, ierr, mean=mean, count=count)
      if (ierr /= SOSLB_OK .or. count /= 100 .or. abs(mean(1) - 50.5_real64) > 1e-9_real64) then
         ierr = -3
         call report()
      end if
      mean = 42
      count = 42
      call soslb_finalize(lb, ierr, mean=mean, count=count)
      if (mean(1) /= 42 .or. count /= 42) ierr = -4
   case ('fresh-message')
      call soslb_init(lb, MPI_COMM_WORLD, 0, ierr)
      call soslb_init(lb, MPI_COMM_WORLD, 10, ierr)
      if (ierr == SOSLB_OK .and. len(soslb_error_message()) /= 0) ierr = -5
      if (ierr == SOSLB_OK) then
         ! An error found in Fortran (a live soslb_t), then successful calls.
         call soslb_init(lb, MPI_COMM_WORLD, 10, ierr)
         if (ierr /= SOSLB_ERR_STATE) ierr = -7
         if (ierr /= -7) then
            do while (soslb_next(lb, first, last, ierr))
            end do
            if (ierr == SOSLB_OK .and. len(soslb_error_message()) /= 0) ierr = -7
         end if
         if (ierr == SOSLB_OK) call soslb_finalize(lb, ierr)
      end if
   case ('stop')
      call soslb_init(lb, MPI_COMM_WORLD, 100000, ierr)
      do while (soslb_next(lb, first, last, ierr))
         do while (first <= last)
            call soslb_add(lb, 1.0_real64)
            first = first + 1
         end do
         if (rank == 1) call soslb_stop(lb, ierr)
      end do
      call MPI_Comm_size(MPI_COMM_WORLD, ranks, mpierr)
      allocate (computed(ranks))
      if (ierr == SOSLB_OK) call soslb_finalize(lb, ierr, count=count, computed=computed)
      if (ierr == SOSLB_OK .and. (count < 1 .or. count >= 100000)) ierr = -6
      ! Every chunk a rank computed counts, the last one before the stop too.
      if (ierr == SOSLB_OK .and. sum(computed) /= count) ierr = -8
   case ('add-twice')
      call soslb_init(lb, MPI_COMM_WORLD, 100, ierr)
      do while (soslb_next(lb, first, last, ierr))
         do while (first <= last)
            call soslb_add(lb, 1.0_real64)
            if (rank == 1) call soslb_add(lb, 2.0_real64, ierr)
            if (ierr /= SOSLB_OK) exit
            first = first + 1
         end do
      end do
   case ('finalize-sizes')
      call compute_ids()
      mean = 42
      count = 42
      if (rank == 0) then
         call soslb_finalize(lb, ierr, mean=mean, std_error=wide, count=count)
         if (mean(1) /= 42 .or. count /= 42) ierr = -9
      else
         call soslb_finalize(lb, ierr, mean=mean, count=count)
      end if
      call MPI_Reduce(merge(1, 0, rank /= 0 .and. ierr == SOSLB_OK .and. count == 100), same, 1, &
         MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, mpierr)
      if (rank == 0) write (*, '(a,i0)') 'others_ok=', same
   case ('absent-ierr')
      call soslb_init(lb, MPI_COMM_WORLD, 0)
      ierr = SOSLB_OK
   case default
      ierr = -2
   end select
   call report()

contains

   !> Init for 100 realisations and add each id as its value.
   subroutine compute_ids()
      call soslb_init(lb, MPI_COMM_WORLD, 100, ierr)
      do while (soslb_next(lb, first, last, ierr))
         do while (first <= last)
            call soslb_add(lb, real(first, real64))
            first = first + 1
         end do
      end do
   end subroutine compute_ids

   !> Print the outcome on rank 0 and end the program.
   subroutine report()
      integer :: code0
      code0 = ierr
      call MPI_Bcast(code0, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, mpierr)
      call MPI_Reduce(merge(1, 0, ierr == code0), same, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, mpierr)
      if (rank == 0) then
         write (*, '(a,i0,a)') 'case=' // trim(name) // ' ierr=', ierr, ' message=' // soslb_error_message()
         write (*, '(a,i0,a)') 'ranks_with_code=', same, ' code_name=' // code_name(ierr)
      end if
      call MPI_Finalize(mpierr)
      stop
   end subroutine report

   !> The name of the module's parameter equal to `code`.
   function code_name(code) result(text)
      integer, intent(in) :: code
      character(len=:), allocatable :: text
      select case (code)
      case (SOSLB_OK); text = 'SOSLB_OK'
      case (SOSLB_ERR_ARGUMENT); text = 'SOSLB_ERR_ARGUMENT'
      case (SOSLB_ERR_CONFIG); text = 'SOSLB_ERR_CONFIG'
      case (SOSLB_ERR_MPI); text = 'SOSLB_ERR_MPI'
      case (SOSLB_ERR_IO); text = 'SOSLB_ERR_IO'
      case (SOSLB_ERR_CORRUPT); text = 'SOSLB_ERR_CORRUPT'
      case (SOSLB_ERR_STALE_JOB); text = 'SOSLB_ERR_STALE_JOB'
      case (SOSLB_ERR_LOCKING); text = 'SOSLB_ERR_LOCKING'
      case (SOSLB_ERR_STATE); text = 'SOSLB_ERR_STATE'
      case (SOSLB_ERR_INTERNAL); text = 'SOSLB_ERR_INTERNAL'
      case (SOSLB_ERR_AUDIT); text = 'SOSLB_ERR_AUDIT'
      case default; text = 'unknown'
      end select
   end function code_name

end program errors
