!> slab: Monte-Carlo transmission of particles through a plane slab, the demo
!> of soslb.
!>
!> Physics: a slab 0 <= x <= L of thickness L = 2 mean free paths, scattering
!> albedo c = 0.7 (at a collision the particle scatters with probability c,
!> else it is absorbed), isotropic scattering. Particles enter at the left face
!> normally (mu = 1). A history ends by transmission (x > L), reflection
!> (x < 0) or absorption. One realisation = 2000 histories; its observables
!> are the transmitted and the reflected fractions. soslb balances the
!> realisations over the ranks and returns their mean and standard error.
!>
!> The random stream of realisation k starts from soslb_seed(SLAB_SEED, k),
!> which depends on k alone, so the results do not depend on which rank
!> computed what: every run with the same `total` prints the same numbers,
!> whatever the number of ranks, the mode or the speeds, and a job killed and
!> resumed (config `job_name`, then `resume: true`) prints the numbers of an
!> uninterrupted one. The mode and every other setting come from the config
!> file or the SOSLB_* variables (SOSLB_MODE=Static, ...).
!>
!> Output on rank 0, the last line in a fixed format for scripts (C's %.17e):
!>
!>    stats: realisations=<n> mean=<transmission mean> stderr=<its standard error>
!>
!> Build and run (from the repository root, after `cargo build --release`):
!>
!>    mpif90 -O2 -o slab fortran/soslb.f90 examples/slab.f90 \
!>       target/release/libsoslb.a -lpthread -ldl -lm
!>    mpirun -np 6 ./slab 4000 examples/slab.ron
!>
!> Usage: slab [total] [config]   (defaults 4000 and examples/slab.ron)

!> The random generator and the physics of one realisation.
module slab_mc
   use, intrinsic :: iso_fortran_env, only: int64, real64
   use soslb, only: soslb_seed
   implicit none
   private

   public :: rng_t, rng_seed, rng_uniform, splitmix64, add64, mul64, slab_realisation
   public :: SLAB_THICKNESS, SLAB_ALBEDO, SLAB_HISTORIES, SLAB_SEED

   real(real64), parameter :: SLAB_THICKNESS = 2.0_real64   !! L, in mean free paths
   real(real64), parameter :: SLAB_ALBEDO = 0.7_real64      !! c, scattering probability at a collision
   integer, parameter :: SLAB_HISTORIES = 2000              !! histories of one realisation
   integer(int64), parameter :: SLAB_SEED = 20070601_int64  !! the user's seed of every stream

   ! The random generator: xoshiro256+ (Blackman & Vigna), seeded by
   ! splitmix64, as its authors recommend; xoshiro256+ is their generator for
   ! floating-point numbers, which take its upper 53 bits (its weak lowest
   ! bits are dropped).
   !
   ! Fortran has no unsigned integers, and an integer overflow is not defined
   ! by the standard (gfortran may optimise on the assumption that it does not
   ! happen). So an int64 here is only a container of 64 bits, and the code
   ! never lets an arithmetic result leave the range of int64:
   ! - xor, and, or, shifts (ishft: logical, zeros shifted in) and rotations
   !   (ishftc) are bit operations, defined on the bit sequence whatever the
   !   value of the sign bit;
   ! - additions and multiplications modulo 2**64 (add64, mul64) work on
   !   32-bit or 16-bit pieces of the operands, which are non-negative, so no
   !   sum or product exceeds 2**35;
   ! - the constants are built with ior/ishft from 32-bit halves, which are
   !   in range;
   ! - a uniform double takes the upper 53 bits, ishft(r, -11), a number in
   !   [0, 2**53) that converts to real64 exactly, times 2**-53: [0, 1).
   ! Checked against the C reference (uint64_t arithmetic) on test vectors.

   integer(int64), parameter :: M16 = int(z'FFFF', int64)
   integer(int64), parameter :: M32 = int(z'FFFFFFFF', int64)
   integer(int64), parameter :: GOLDEN = ior(ishft(int(z'9E3779B9', int64), 32), int(z'7F4A7C15', int64))
   integer(int64), parameter :: MIX1 = ior(ishft(int(z'BF58476D', int64), 32), int(z'1CE4E5B9', int64))
   integer(int64), parameter :: MIX2 = ior(ishft(int(z'94D049BB', int64), 32), int(z'133111EB', int64))
   real(real64), parameter :: TWO_M53 = 1.0_real64 / 9007199254740992.0_real64   ! 2**-53

   !> The state of xoshiro256+.
   type :: rng_t
      integer(int64) :: s(0:3) = 0
   end type rng_t

contains

   !> (a + b) modulo 2**64.
   elemental function add64(a, b) result(r)
      integer(int64), intent(in) :: a, b
      integer(int64) :: r, lo, hi
      lo = iand(a, M32) + iand(b, M32)                          ! < 2**33
      hi = ishft(a, -32) + ishft(b, -32) + ishft(lo, -32)       ! < 2**33 + 1
      r = ior(ishft(hi, 32), iand(lo, M32))                     ! bits of hi above 32 are shifted out
   end function add64

   !> (a * b) modulo 2**64, by 16-bit limbs: the low four limbs of the product.
   elemental function mul64(a, b) result(r)
      integer(int64), intent(in) :: a, b
      integer(int64) :: r, x(0:3), y(0:3), acc, carry
      integer :: i, k
      do i = 0, 3
         x(i) = iand(ishft(a, -16 * i), M16)
         y(i) = iand(ishft(b, -16 * i), M16)
      end do
      r = 0
      carry = 0
      do k = 0, 3
         acc = carry                                            ! < 2**19
         do i = 0, k
            acc = acc + x(i) * y(k - i)                         ! each product < 2**32
         end do
         r = ior(r, ishft(iand(acc, M16), 16 * k))
         carry = ishft(acc, -16)
      end do
   end function mul64

   !> splitmix64 (Steele, Lea & Flood): advance the state x, return a mixed value.
   function splitmix64(x) result(z)
      integer(int64), intent(inout) :: x
      integer(int64) :: z
      x = add64(x, GOLDEN)
      z = x
      z = mul64(ieor(z, ishft(z, -30)), MIX1)
      z = mul64(ieor(z, ishft(z, -27)), MIX2)
      z = ieor(z, ishft(z, -31))
   end function splitmix64

   !> The stream of realisation `id` (1-based): xoshiro256+ filled by
   !> splitmix64 from soslb_seed(SLAB_SEED, id).
   subroutine rng_seed(rng, id)
      type(rng_t), intent(out) :: rng
      integer(int64), intent(in) :: id
      integer(int64) :: x
      integer :: i
      x = soslb_seed(SLAB_SEED, id)
      do i = 0, 3
         rng%s(i) = splitmix64(x)
      end do
   end subroutine rng_seed

   !> A uniform double in [0, 1) from the upper 53 bits of xoshiro256+.
   function rng_uniform(rng) result(u)
      type(rng_t), intent(inout) :: rng
      real(real64) :: u
      integer(int64) :: r, t
      r = add64(rng%s(0), rng%s(3))
      t = ishft(rng%s(1), 17)
      rng%s(2) = ieor(rng%s(2), rng%s(0))
      rng%s(3) = ieor(rng%s(3), rng%s(1))
      rng%s(1) = ieor(rng%s(1), rng%s(2))
      rng%s(0) = ieor(rng%s(0), rng%s(3))
      rng%s(2) = ieor(rng%s(2), t)
      rng%s(3) = ishftc(rng%s(3), 45)                           ! rotate left by 45
      u = real(ishft(r, -11), real64) * TWO_M53
   end function rng_uniform

   !> Realisation `id`: SLAB_HISTORIES histories; the fractions transmitted
   !> and reflected.
   subroutine slab_realisation(id, transmitted, reflected)
      integer(int64), intent(in) :: id
      real(real64), intent(out) :: transmitted, reflected
      type(rng_t) :: rng
      real(real64) :: x, mu
      integer :: h, nt, nr

      call rng_seed(rng, id)
      nt = 0
      nr = 0
      do h = 1, SLAB_HISTORIES
         x = 0
         mu = 1
         do
            ! Flight to the next collision: an exponential path length, in
            ! mean free paths (1 - u is in (0, 1], so the log is finite).
            x = x + mu * (-log(1 - rng_uniform(rng)))
            if (x > SLAB_THICKNESS) then
               nt = nt + 1
               exit
            else if (x < 0) then
               nr = nr + 1
               exit
            end if
            if (rng_uniform(rng) >= SLAB_ALBEDO) exit           ! absorbed
            mu = 2 * rng_uniform(rng) - 1                       ! isotropic scattering
         end do
      end do
      transmitted = real(nt, real64) / SLAB_HISTORIES
      reflected = real(nr, real64) / SLAB_HISTORIES
   end subroutine slab_realisation

end module slab_mc

program slab
   use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit, output_unit
   use mpi
   use soslb
   use slab_mc, only: slab_realisation
   implicit none

   type(soslb_t) :: lb
   integer(int64) :: total, first, last, k, count
   character(len=:), allocatable :: config
   real(real64) :: observables(2), mean(2), std_error(2)
   integer :: ierr, mpierr, rank

   ! MPI errors abort the job (MPI_ERRORS_ARE_FATAL, the default handler),
   ! so mpierr is not checked; soslb's ierr is.
   call MPI_Init(mpierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
   call arguments(total, config)

   call soslb_init(lb, MPI_COMM_WORLD, total, ierr, config=config)
   call check('soslb_init')
   do while (soslb_next(lb, first, last, ierr))
      do k = first, last
         call slab_realisation(k, observables(1), observables(2))
         call soslb_add(lb, observables, ierr)
         call check('soslb_add')
      end do
   end do
   call check('soslb_next')
   call soslb_finalize(lb, ierr, mean=mean, std_error=std_error, count=count)
   call check('soslb_finalize')

   if (rank == 0) then
      write (output_unit, '(a,es24.16,a,es24.16)') 'transmission: mean=', mean(1), ' std_error=', std_error(1)
      write (output_unit, '(a,es24.16,a,es24.16)') 'reflection: mean=', mean(2), ' std_error=', std_error(2)
      write (output_unit, '(a,i0,a,a,a,a)') 'stats: realisations=', count, ' mean=', c_e17(mean(1)), &
         ' stderr=', c_e17(std_error(1))
      flush (output_unit)
   end if
   call MPI_Finalize(mpierr)

contains

   !> `x` as C's printf("%.17e") writes it: 1.23456789012345678e-01, nan, inf.
   function c_e17(x) result(text)
      use, intrinsic :: ieee_arithmetic, only: ieee_is_nan, ieee_is_finite
      real(real64), intent(in) :: x
      character(len=:), allocatable :: text
      character(len=32) :: buf
      integer :: e, exponent

      if (ieee_is_nan(x)) then
         text = 'nan'
      else if (.not. ieee_is_finite(x)) then
         text = merge('-inf', ' inf', x < 0)
         text = trim(adjustl(text))
      else
         write (buf, '(es32.17e3)') x                   ! [-]d.dddddddddddddddddE[+-]ddd
         buf = adjustl(buf)
         e = index(buf, 'E')
         read (buf(e + 1:), *) exponent
         if (abs(exponent) < 100) then
            write (buf(e:), '(a,sp,i3.2)') 'e', exponent   ! at least two digits, as C
         else
            write (buf(e:), '(a,sp,i0)') 'e', exponent
         end if
         text = trim(buf(:e)) // trim(adjustl(buf(e + 1:)))
      end if
   end function c_e17

   !> slab [total] [config]
   subroutine arguments(total, config)
      integer(int64), intent(out) :: total
      character(len=:), allocatable, intent(out) :: config
      character(len=:), allocatable :: arg
      integer :: length, status

      total = 4000
      config = 'examples/slab.ron'
      if (command_argument_count() > 2) call usage('too many arguments')
      if (command_argument_count() >= 1) then
         call get_command_argument(1, length=length)
         allocate (character(len=length) :: arg)
         call get_command_argument(1, arg)
         read (arg, *, iostat=status) total
         if (status /= 0) call usage('total is not an integer: ' // arg)
         ! total <= 0 is left to soslb_init to reject.
      end if
      if (command_argument_count() >= 2) then
         call get_command_argument(2, length=length)
         deallocate (config)
         allocate (character(len=length) :: config)
         call get_command_argument(2, config, status=status)
         if (status /= 0) call usage('cannot read the config argument')
      end if
   end subroutine arguments

   subroutine usage(problem)
      character(len=*), intent(in) :: problem
      if (rank == 0) then
         write (error_unit, '(a)') 'slab: ' // problem
         write (error_unit, '(a)') 'usage: slab [total] [config]   (defaults 4000 and examples/slab.ron)'
         flush (error_unit)
      end if
      stop 2
   end subroutine usage

   !> On an error of `what`, print the library's message and stop the job:
   !> a stop with the error's code ends the other ranks too, as MPI_Abort
   !> would, but MPICH's mpiexec may drop what an aborting rank has just written.
   subroutine check(what)
      character(len=*), intent(in) :: what
      if (ierr /= SOSLB_OK) then
         write (error_unit, '(a,i0,a,i0,a)') 'slab: rank ', rank, ': ' // what // ' failed (ierr=', ierr, &
            '): ' // soslb_error_message()
         flush (error_unit)
         stop ierr
      end if
   end subroutine check

end program slab
