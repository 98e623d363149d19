!> soslb: load balancing of Monte-Carlo realisations over the ranks of an MPI
!> communicator -- the Fortran module.
!>
!> A thin, idiomatic layer over the C interface of the Rust library
!> (fortran/soslb.h): bind(C) interfaces underneath (private), 1-based
!> integer(int64) realisation ids, an optional `ierr` as the last positional
!> argument of every call.
!>
!> Usage
!> -----
!>
!>    use mpi                          ! or mpi_f08, see "Communicator" below
!>    use soslb
!>    type(soslb_t)  :: lb
!>    integer(int64) :: first, last, k
!>    real(real64)   :: x, mean(1), err(1)
!>    integer        :: ierr
!>
!>    call soslb_init(lb, MPI_COMM_WORLD, total, ierr, config='soslb.ron')  ! collective
!>    do while (soslb_next(lb, first, last, ierr))
!>       do k = first, last
!>          call realisation(k, x)     ! seeds its RNG from k, never from the rank
!>          call soslb_add(lb, x)      ! optional: observables for the final statistics
!>       end do
!>    end do
!>    if (ierr /= SOSLB_OK) ...        ! soslb_next is .false. when done or on error
!>                                     ! (an error on any rank is an error on every rank)
!>    call soslb_finalize(lb, ierr, mean=mean, std_error=err)                ! collective
!>
!> The program calls MPI_Init before soslb_init and MPI_Finalize after
!> soslb_finalize; the library never does.
!>
!> Public API
!> ----------
!>
!>    type(soslb_t)                      an opaque balancer (a null handle until soslb_init)
!>
!>    subroutine soslb_init(lb, comm, total, ierr, config)            collective over comm
!>       type(soslb_t),    intent(inout)          :: lb      ! must not be initialised yet
!>       integer,          intent(in)             :: comm    ! Fortran MPI handle
!>       integer(int64) | integer(int32), intent(in) :: total ! realisations, ids 1..total
!>       integer,          intent(out), optional  :: ierr
!>       character(len=*), intent(in),  optional  :: config  ! path of a RON config file
!>
!>    logical function soslb_next(lb, first, last, ierr)
!>       type(soslb_t),    intent(inout)          :: lb
!>       integer(int64),   intent(out)            :: first, last   ! compute ids first..last
!>       integer,          intent(out), optional  :: ierr
!>       ! .true.: a chunk first..last (first <= last) to compute;
!>       ! .false.: the job is over (ierr = 0: every id computed, or a rank called
!>       !          soslb_stop) or failed (ierr /= 0, on every rank, with the
!>       !          message "rank N failed: ..."); first = 1 and last = 0 then.
!>       ! A rank without work of its own may wait inside soslb_next while it
!>       ! helps slower ranks: keep calling it until it returns .false.
!>
!>    subroutine soslb_add(lb, x, ierr)
!>       type(soslb_t),    intent(inout)          :: lb
!>       real(real64),     intent(in)             :: x  |  x(:)   ! 1 or size(x) observables
!>       integer,          intent(out), optional  :: ierr
!>       ! The observables of one realisation. Every call of a run passes the
!>       ! same number of observables (at most 256), once per realisation
!>       ! (more calls than realisations handed out: SOSLB_ERR_STATE on every
!>       ! rank). Sums are exact, so the statistics do not depend on which
!>       ! rank computed which realisation.
!>
!>    subroutine soslb_stop(lb, ierr)
!>       type(soslb_t),    intent(inout)          :: lb
!>       integer,          intent(out), optional  :: ierr
!>       ! A user's stopping rule (e.g. the standard error is small enough):
!>       ! soslb_next returns .false. on every rank soon (on this rank at its
!>       ! next call); the statistics cover exactly the realisations added.
!>
!>    subroutine soslb_finalize(lb, ierr, mean, std_error, count, variance, computed)   collective
!>       type(soslb_t),    intent(inout)          :: lb        ! null handle afterwards
!>       integer,          intent(out), optional  :: ierr
!>       real(real64),     intent(inout), optional :: mean(:), std_error(:), variance(:)
!>       integer(int64),   intent(inout), optional :: count  ! realisations added, all ranks
!>       integer(int64),   intent(inout), optional :: computed(:)  ! per rank, ranks 0..size-1
!>       ! The mean, the sample variance (with n-1) and the standard error of
!>       ! the mean of the first n observables, n = the size of the arrays
!>       ! given (they must have the same size). Without them no statistics
!>       ! are returned. `count` includes realisations journalled by earlier
!>       ! runs of a resumed job; computed(r+1) is what rank r computed in
!>       ! this run (-1 beyond the number of ranks). On an error the
!>       ! arguments are left untouched. Called while the rank still owns
!>       ! realisations (before soslb_next returned .false., and without
!>       ! soslb_stop), it is an error on every rank.
!>
!>    integer(int64) function soslb_seed(user_seed, id)
!>       integer(int64),   intent(in)             :: user_seed, id   ! id in 1..total
!>       ! The start of realisation id's random stream: a well-mixed 64-bit
!>       ! value that depends on (user_seed, id) alone, never on the rank or
!>       ! the balancing (the same as soslb_seed(user_seed, id - 1) in C).
!>       ! Fill your generator's state from it (e.g. through splitmix64).
!>
!>    function soslb_error_message() result(msg)
!>       character(len=:), allocatable :: msg
!>       ! The text of the last error of the calling thread ('' if none).
!>
!>    integer, parameter :: SOSLB_OK = 0, SOSLB_ERR_ARGUMENT = 1, SOSLB_ERR_CONFIG = 2,
!>       SOSLB_ERR_MPI = 3, SOSLB_ERR_IO = 4, SOSLB_ERR_CORRUPT = 5,
!>       SOSLB_ERR_STALE_JOB = 6, SOSLB_ERR_LOCKING = 7, SOSLB_ERR_STATE = 8,
!>       SOSLB_ERR_INTERNAL = 9, SOSLB_ERR_AUDIT = 10   (the codes of soslb.h)
!>
!> Errors
!> ------
!>
!> `ierr` is the last positional argument and optional everywhere (`config`,
!> `mean`, `std_error`, `count`, `variance` and `computed` are keyword
!> arguments after it). When `ierr` is
!> present it is set to SOSLB_OK (0) or to one of the SOSLB_ERR_* codes, and
!> soslb_error_message() gives the text. When `ierr` is absent, an error is
!> fatal, like MPI's default error handler: the module writes
!> "soslb: <message>" to error_unit and executes `error stop <code>`, and
!> mpirun then takes the whole job down.
!>
!> Two errors are detected in Fortran: soslb_init on a soslb_t that is
!> already initialised (SOSLB_ERR_STATE, before any collective communication)
!> and soslb_finalize with `mean` and `std_error` (and `variance`) of
!> different sizes (SOSLB_ERR_ARGUMENT on that rank once the collective
!> finalisation is done, so that no rank waits for it; the arguments are left
!> as they were). Their messages are kept by this module, which is not thread safe:
!> call soslb from one thread (the library makes MPI calls only from the
!> calling thread anyway).
!>
!> Communicator
!> ------------
!>
!> `comm` is the default-kind integer handle of the `mpi` module (or mpif.h),
!> passed to the library as a 32-bit integer and converted there with
!> MPI_Comm_f2c. With the `mpi_f08` module pass its integer value:
!>
!>    type(MPI_Comm) :: comm
!>    call soslb_init(lb, comm%MPI_VAL, total, ierr)
!>
!> The library duplicates the communicator (MPI_Comm_dup), so its messages
!> never mix with the application's; soslb_finalize frees the duplicate.
!> This module itself does not need `use mpi`.
!>
!> Configuration
!> -------------
!>
!> `config` is the path of a RON file; trailing blanks are trimmed. An absent
!> or blank `config` means: $SOSLB_CONFIG if set, else ./soslb.ron if it
!> exists, else the defaults.
!>
!> Notes
!> -----
!>
!> - ids are 1-based here (1..total); the C interface is 0-based.
!> - a soslb_t is a handle: do not copy it (copies would share one balancer,
!>   and a copy would dangle after soslb_finalize). It has no final procedure,
!>   because finalize is collective: call soslb_finalize explicitly.
!>
!> Building
!> --------
!>
!>    cargo build --release                       # target/release/libsoslb.a
!>    mpif90 -c fortran/soslb.f90                 # soslb.mod, soslb.o
!>    mpif90 -o app app.f90 soslb.o target/release/libsoslb.a -lpthread -ldl -lm
!>
!> or in one line, as for the demo (examples/slab.f90):
!>
!>    mpif90 -O2 -o slab fortran/soslb.f90 examples/slab.f90 \
!>       target/release/libsoslb.a -lpthread -ldl -lm
module soslb
   use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_associated, &
      c_int, c_int32_t, c_int64_t, c_double, c_char, c_null_char
   use, intrinsic :: iso_fortran_env, only: int32, int64, real64, error_unit
   use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
   implicit none
   private

   public :: soslb_init, soslb_next, soslb_add, soslb_stop, soslb_finalize, soslb_error_message, &
      soslb_seed

   ! Error codes, as in soslb.h.
   integer, parameter, public :: SOSLB_OK = 0
   integer, parameter, public :: SOSLB_ERR_ARGUMENT = 1   !! a wrong argument: total <= 0, observable counts that differ, ...
   integer, parameter, public :: SOSLB_ERR_CONFIG = 2     !! the configuration file or a SOSLB_* variable is wrong
   integer, parameter, public :: SOSLB_ERR_MPI = 3        !! MPI not initialised, or another rank failed at init
   integer, parameter, public :: SOSLB_ERR_IO = 4         !! a file operation on the signal directory failed
   integer, parameter, public :: SOSLB_ERR_CORRUPT = 5    !! a signal file does not hold what it should
   integer, parameter, public :: SOSLB_ERR_STALE_JOB = 6  !! the job directory holds files of an earlier job
   integer, parameter, public :: SOSLB_ERR_LOCKING = 7    !! another run of this job_name holds its journal's lock
   integer, parameter, public :: SOSLB_ERR_STATE = 8      !! a call in the wrong state (after finalize, ...)
   integer, parameter, public :: SOSLB_ERR_INTERNAL = 9   !! a bug in soslb
   integer, parameter, public :: SOSLB_ERR_AUDIT = 10     !! finalize found ids computed twice or never

   !> An opaque balancer: a handle to the library's state.
   type, public :: soslb_t
      private
      type(c_ptr) :: handle = c_null_ptr
   end type soslb_t

   !> soslb_init(lb, comm, total, ierr, config): total as integer(int64) or default integer.
   interface soslb_init
      module procedure init_int64, init_default
   end interface soslb_init

   !> soslb_add(lb, x, ierr): one observable (scalar) or size(x) observables.
   interface soslb_add
      module procedure add_scalar, add_array
   end interface soslb_add

   ! The C functions of soslb.h. Optional dummies of a bind(C) interface are
   ! passed as NULL when absent (Fortran 2018).
   interface
      function c_soslb_init(comm, total, config, lb) bind(C, name='soslb_init') result(code)
         import :: c_int, c_int32_t, c_int64_t, c_char, c_ptr
         integer(c_int32_t), value :: comm
         integer(c_int64_t), value :: total
         character(kind=c_char), intent(in), optional :: config(*)
         type(c_ptr), intent(inout) :: lb                 ! soslb **
         integer(c_int) :: code
      end function c_soslb_init

      function c_soslb_next(lb, first, count) bind(C, name='soslb_next') result(code)
         import :: c_int, c_int64_t, c_ptr
         type(c_ptr), value :: lb
         integer(c_int64_t), intent(out) :: first, count
         integer(c_int) :: code
      end function c_soslb_next

      function c_soslb_add(lb, values, n) bind(C, name='soslb_add') result(code)
         import :: c_int, c_int64_t, c_double, c_ptr
         type(c_ptr), value :: lb
         real(c_double), intent(in) :: values(*)
         integer(c_int64_t), value :: n
         integer(c_int) :: code
      end function c_soslb_add

      function c_soslb_stop(lb) bind(C, name='soslb_stop') result(code)
         import :: c_int, c_ptr
         type(c_ptr), value :: lb
         integer(c_int) :: code
      end function c_soslb_stop

      function c_soslb_finalize(lb, mean, variance, std_error, n, count, computed, ranks) &
         bind(C, name='soslb_finalize') result(code)
         import :: c_int, c_int64_t, c_double, c_ptr
         type(c_ptr), intent(inout) :: lb                 ! soslb **
         real(c_double), intent(inout) :: mean(*), variance(*), std_error(*)
         integer(c_int64_t), value :: n
         integer(c_int64_t), intent(out) :: count
         integer(c_int64_t), intent(inout) :: computed(*)
         integer(c_int64_t), value :: ranks
         integer(c_int) :: code
      end function c_soslb_finalize

      function c_soslb_seed(user_seed, id) bind(C, name='soslb_seed') result(seed)
         import :: c_int64_t
         integer(c_int64_t), value :: user_seed, id
         integer(c_int64_t) :: seed
      end function c_soslb_seed

      function c_soslb_error_message(buf, len) bind(C, name='soslb_error_message') result(full)
         import :: c_int64_t, c_char
         character(kind=c_char), intent(inout) :: buf(*)
         integer(c_int64_t), value :: len
         integer(c_int64_t) :: full
      end function c_soslb_error_message
   end interface

   ! The last error detected in Fortran (see "Errors" above): its message is
   ! the one soslb_error_message returns while `local_error` is set, that is
   ! until the next call of the C library (which clears or sets its own).
   logical, save :: local_error = .false.
   character(len=:), allocatable, save :: local_message

contains

   subroutine init_int64(lb, comm, total, ierr, config)
      type(soslb_t), intent(inout) :: lb
      integer, intent(in) :: comm
      integer(int64), intent(in) :: total
      integer, intent(out), optional :: ierr
      character(len=*), intent(in), optional :: config
      call init_common(lb, comm, int(total, c_int64_t), ierr, config)
   end subroutine init_int64

   ! `total` of kind int32, not default: with default integers of 8 bytes
   ! (-fdefault-integer-8, -i8) the two would be one and the same.
   subroutine init_default(lb, comm, total, ierr, config)
      type(soslb_t), intent(inout) :: lb
      integer, intent(in) :: comm
      integer(int32), intent(in) :: total
      integer, intent(out), optional :: ierr
      character(len=*), intent(in), optional :: config
      call init_common(lb, comm, int(total, c_int64_t), ierr, config)
   end subroutine init_default

   subroutine init_common(lb, comm, total, ierr, config)
      type(soslb_t), intent(inout) :: lb
      integer, intent(in) :: comm
      integer(c_int64_t), intent(in) :: total
      integer, intent(out), optional :: ierr
      character(len=*), intent(in), optional :: config
      character(kind=c_char), allocatable :: path(:)
      integer(c_int) :: code
      integer :: i, n

      if (c_associated(lb%handle)) then
         call fail_local(SOSLB_ERR_STATE, 'soslb_init: this soslb_t is already initialised; ' // &
            'call soslb_finalize first (or use another soslb_t)', ierr)
         return
      end if

      n = 0
      if (present(config)) n = len_trim(config)
      if (n > 0) then
         allocate (path(n + 1))
         do i = 1, n
            path(i) = config(i:i)
         end do
         path(n + 1) = c_null_char
         code = c_soslb_init(int(comm, c_int32_t), total, path, lb%handle)
      else
         code = c_soslb_init(comm=int(comm, c_int32_t), total=total, lb=lb%handle)
      end if
      call check(code, ierr)
   end subroutine init_common

   logical function soslb_next(lb, first, last, ierr) result(more)
      type(soslb_t), intent(inout) :: lb
      integer(int64), intent(out) :: first, last
      integer, intent(out), optional :: ierr
      integer(c_int64_t) :: c_first, c_count
      integer(c_int) :: code

      c_first = 0
      c_count = 0
      code = c_soslb_next(lb%handle, c_first, c_count)
      more = code == SOSLB_OK .and. c_count > 0
      if (more) then
         first = int(c_first, int64) + 1          ! 0-based first -> 1-based
         last = int(c_first, int64) + int(c_count, int64)
      else
         first = 1
         last = 0
      end if
      call check(code, ierr)
   end function soslb_next

   subroutine add_scalar(lb, x, ierr)
      type(soslb_t), intent(inout) :: lb
      real(real64), intent(in) :: x
      integer, intent(out), optional :: ierr
      real(c_double) :: values(1)
      values(1) = x
      call check(c_soslb_add(lb%handle, values, 1_c_int64_t), ierr)
   end subroutine add_scalar

   subroutine add_array(lb, x, ierr)
      type(soslb_t), intent(inout) :: lb
      real(real64), intent(in) :: x(:)
      integer, intent(out), optional :: ierr
      ! x is associated with the assumed-size dummy of the interface by
      ! sequence association: the compiler passes a contiguous copy when x is
      ! not contiguous (a strided section, say).
      call check(c_soslb_add(lb%handle, x, int(size(x), c_int64_t)), ierr)
   end subroutine add_array

   subroutine soslb_stop(lb, ierr)
      type(soslb_t), intent(inout) :: lb
      integer, intent(out), optional :: ierr
      call check(c_soslb_stop(lb%handle), ierr)
   end subroutine soslb_stop

   subroutine soslb_finalize(lb, ierr, mean, std_error, count, variance, computed)
      type(soslb_t), intent(inout) :: lb
      integer, intent(out), optional :: ierr
      real(real64), intent(inout), optional :: mean(:), std_error(:), variance(:)
      integer(int64), intent(inout), optional :: count
      integer(int64), intent(inout), optional :: computed(:)
      real(c_double), allocatable :: m(:), v(:), e(:)
      integer(c_int64_t), allocatable :: per_rank(:)
      integer(c_int64_t) :: c_count
      integer(c_int) :: code
      integer :: n, sizes(3), ranks
      logical :: given(3)
      character(len=40) :: text

      given = [present(mean), present(variance), present(std_error)]
      sizes = 0
      if (given(1)) sizes(1) = size(mean)
      if (given(2)) sizes(2) = size(variance)
      if (given(3)) sizes(3) = size(std_error)
      n = 0
      if (any(given)) n = maxval(sizes, mask=given)
      if (any(given .and. sizes /= n)) then
         ! Finalize is collective: the other ranks wait for this one, so it
         ! finalises without the statistics, then says what was wrong.
         allocate (m(0), v(0), e(0), per_rank(0))
         code = c_soslb_finalize(lb%handle, m, v, e, 0_c_int64_t, c_count, per_rank, 0_c_int64_t)
         if (code /= SOSLB_OK) then
            call check(code, ierr)
         else
            write (text, '(i0,", ",i0," and ",i0)') sizes
            call fail_local(SOSLB_ERR_ARGUMENT, 'soslb_finalize: mean, variance and std_error have ' // &
               'different sizes (' // trim(text) // ', 0 when absent); the balancer is finalised ' // &
               'and the arguments are left as they were', ierr)
         end if
         return
      end if
      ranks = 0
      if (present(computed)) ranks = size(computed)

      ! The caller's arguments change only on success; contiguous buffers for C.
      allocate (m(n), v(n), e(n), per_rank(ranks))
      m = ieee_value(1.0_c_double, ieee_quiet_nan)
      v = m
      e = m
      per_rank = -1
      code = c_soslb_finalize(lb%handle, m, v, e, int(n, c_int64_t), c_count, per_rank, &
         int(ranks, c_int64_t))
      if (code == SOSLB_OK) then
         if (present(mean)) mean = real(m, real64)
         if (present(variance)) variance = real(v, real64)
         if (present(std_error)) std_error = real(e, real64)
         if (present(count)) count = int(c_count, int64)
         if (present(computed)) computed = int(per_rank, int64)
      end if
      ! The library has set the handle to NULL: the balancer is freed, also
      ! after an error (finalize is collective and happens once).
      call check(code, ierr)
   end subroutine soslb_finalize

   function soslb_seed(user_seed, id) result(seed)
      integer(int64), intent(in) :: user_seed, id
      integer(int64) :: seed
      seed = int(c_soslb_seed(int(user_seed, c_int64_t), int(id - 1, c_int64_t)), int64)
   end function soslb_seed

   function soslb_error_message() result(msg)
      character(len=:), allocatable :: msg
      character(kind=c_char) :: probe(1)
      character(kind=c_char), allocatable :: buf(:)
      integer(c_int64_t) :: full, got
      integer :: i, n

      if (local_error) then
         msg = local_message
         return
      end if
      ! First for the length, then for the text.
      probe(1) = c_null_char
      full = c_soslb_error_message(probe, 1_c_int64_t)
      if (full <= 0) then
         msg = ''
         return
      end if
      n = int(min(full, int(huge(n) - 1, c_int64_t)))
      allocate (buf(n + 1))
      buf = c_null_char
      got = c_soslb_error_message(buf, int(n + 1, c_int64_t))
      n = int(min(int(n, c_int64_t), max(got, 0_c_int64_t)))
      do i = 1, n                   ! stop at the NUL, should the text have become shorter
         if (buf(i) == c_null_char) then
            n = i - 1
            exit
         end if
      end do
      allocate (character(len=n) :: msg)
      do i = 1, n
         msg(i:i) = buf(i)
      end do
   end function soslb_error_message

   ! Report `code` of a C call: into ierr when present, else fatally.
   subroutine check(code, ierr)
      integer(c_int), intent(in) :: code
      integer, intent(out), optional :: ierr
      local_error = .false.    ! the C library's message (or none) is the newest
      if (present(ierr)) then
         ierr = int(code)
      else if (code /= SOSLB_OK) then
         call fatal(int(code))
      end if
   end subroutine check

   ! An error detected in Fortran.
   subroutine fail_local(code, message, ierr)
      integer, intent(in) :: code
      character(len=*), intent(in) :: message
      integer, intent(out), optional :: ierr
      local_error = .true.
      local_message = message
      if (present(ierr)) then
         ierr = code
      else
         call fatal(code)
      end if
   end subroutine fail_local

   ! The default when no ierr is given, like MPI_ERRORS_ARE_FATAL.
   subroutine fatal(code)
      integer, intent(in) :: code
      write (error_unit, '(a)') 'soslb: ' // soslb_error_message()
      flush (error_unit)
      error stop code
   end subroutine fatal

end module soslb
