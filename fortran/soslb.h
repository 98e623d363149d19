/*
 * soslb: the C interface.
 *
 * Load balancing of Monte-Carlo realisations over the ranks of an MPI
 * communicator. Every function returns 0 on success or one of the SOSLB_ERR_*
 * codes; soslb_error_message() gives the text of the last error of the
 * calling thread. Ids are 0-based here (the Fortran module makes them 1-based).
 *
 *   soslb *lb;
 *   int64_t first, count;
 *   soslb_init(MPI_Comm_c2f(MPI_COMM_WORLD), total, "soslb.ron", &lb);
 *   while (soslb_next(lb, &first, &count) == SOSLB_OK && count > 0)
 *       for (int64_t id = first; id < first + count; id++) {
 *           double x = realisation(id);      // seeds its generator from id
 *           soslb_add(lb, &x, 1);
 *       }
 *   soslb_finalize(&lb, mean, NULL, std_error, 1, NULL, NULL, 0);
 *
 * The library never calls MPI_Init or MPI_Finalize and makes MPI calls only
 * from the thread that calls it.
 */
#ifndef SOSLB_H
#define SOSLB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. */
#define SOSLB_OK 0
#define SOSLB_ERR_ARGUMENT 1 /* a wrong argument: total <= 0, a NULL handle (after finalize), observable counts that differ, ... */
#define SOSLB_ERR_CONFIG 2   /* the configuration file or a SOSLB_* variable is wrong */
#define SOSLB_ERR_MPI 3      /* MPI not initialised, or another rank failed at init */
#define SOSLB_ERR_IO 4       /* a file operation on the signal directory failed */
#define SOSLB_ERR_CORRUPT 5  /* a signal file does not hold what it should */
#define SOSLB_ERR_STALE_JOB 6 /* the job directory holds files of an earlier job */
#define SOSLB_ERR_LOCKING 7  /* another run of this job_name holds its journal's lock */
#define SOSLB_ERR_STATE 8    /* a call in the wrong state: finalize while ids are left, more soslb_add calls than realisations handed out, init on a live soslb_t (Fortran; C cannot tell a live handle from an uninitialised pointer), ... */
#define SOSLB_ERR_INTERNAL 9 /* a bug in soslb */
#define SOSLB_ERR_AUDIT 10   /* finalize found ids computed twice or never */
/*
 * An error on one rank is an error on every rank: soslb_next (and
 * soslb_finalize) then return the failed rank's code on every rank, with the
 * message "rank N failed: <its message>". No rank is left waiting.
 */

/* An opaque balancer. */
typedef struct soslb soslb;

/*
 * Collective over `comm`, a Fortran communicator handle (from C:
 * MPI_Comm_c2f(comm)); the communicator is duplicated. `total` > 0
 * realisations. `config` is the path of a RON configuration file (UTF-8;
 * trailing blanks are dropped, as Fortran pads its strings, and an empty path
 * counts as NULL), or NULL to use $SOSLB_CONFIG, else ./soslb.ron if it
 * exists, else the defaults.
 */
int soslb_init(int32_t comm, int64_t total, const char *config, soslb **lb);

/*
 * The next chunk: ids first .. first + count - 1. *count == 0 means the job is
 * over: every id was computed, or a rank called soslb_stop. A rank without
 * work may wait here while it helps others.
 */
int soslb_next(soslb *lb, int64_t *first, int64_t *count);

/*
 * End the loop early on every rank (a user's stopping rule, e.g. a small
 * enough standard error): soslb_next reports the end on every rank soon, on
 * this one at its next call; the statistics cover exactly the realisations
 * added.
 */
int soslb_stop(soslb *lb);

/*
 * Add the `n` observables of one realisation to the final statistics. Every
 * call of a run passes the same n (at most 256), once per realisation: a
 * call for more realisations than soslb_next handed out to this rank is a
 * SOSLB_ERR_STATE on every rank. Sums are exact, so the statistics do not
 * depend on which rank computed which realisation.
 */
int soslb_add(soslb *lb, const double *values, int64_t n);

/*
 * Collective. Writes, for each of the first `n` observables, the mean, the
 * sample variance (with n - 1) and the standard error of the mean, into
 * those of the arrays `mean`, `variance` and `std_error` that are not NULL
 * (n may be 0); when `count` is not NULL, the number of realisations added
 * over all ranks (with a resumed journal, the journalled ones too); when
 * `computed` is not NULL, the realisations each of the first `ranks` ranks
 * computed in this run (-1 beyond the communicator's size). Frees the
 * balancer and its duplicate communicator, and sets *lb to NULL. On an
 * error nothing is written to the arrays. Called before soslb_next reported
 * the end (and without soslb_stop), it is an error on every rank.
 */
int soslb_finalize(soslb **lb, double *mean, double *variance, double *std_error, int64_t n,
                   int64_t *count, int64_t *computed, int64_t ranks);

/*
 * The start of the random stream of realisation `id` (0-based) for the
 * user's seed: a well-mixed 64-bit value that depends on (user_seed, id)
 * alone, never on the rank or on the balancing, so a realisation computes
 * the same values wherever and whenever it runs (also in a resumed job).
 * Distinct ids give distinct values. Fill the state of your generator from
 * it (e.g. through splitmix64), or use it as the state of a splitmix64
 * generator. Fortran's soslb_seed(user_seed, k) takes the 1-based id k and
 * gives the value of id k - 1 here.
 */
uint64_t soslb_seed(uint64_t user_seed, int64_t id);

/*
 * Copy the message of the last error of the calling thread into buf (NUL
 * terminated, truncated to at most len - 1 bytes at a UTF-8 character's
 * boundary); empty after a successful call.
 * Returns the message's full length.
 */
int64_t soslb_error_message(char *buf, int64_t len);

#ifdef __cplusplus
}
#endif

#endif /* SOSLB_H */
