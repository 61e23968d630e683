/*
 * safe_output.c: see safe_output.h. The signal table holds fixed-size
 * copies of the temporaries' paths, so the handler's walk touches no heap
 * and calls only unlink(), which is async-signal-safe.
 */
#define _GNU_SOURCE /* realpath, mkostemp */
#include "base/safe_output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"

#define SLOTS 8
#define SLOT_PATH 4096

static char slot_path[SLOTS][SLOT_PATH];
static volatile sig_atomic_t slot_used[SLOTS];

static int slot_take(const char *path) {
    if (strlen(path) >= SLOT_PATH) return -1;
    for (int i = 0; i < SLOTS; i++) {
        int expected = 0;
        if (__atomic_compare_exchange_n((int *)&slot_used[i], &expected, 2, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            memcpy(slot_path[i], path, strlen(path) + 1);
            __atomic_store_n((int *)&slot_used[i], 1, __ATOMIC_SEQ_CST); /* 1: the path is complete */
            return i;
        }
    }
    return -1;
}

static void slot_release(int i) {
    if (i >= 0 && i < SLOTS) __atomic_store_n((int *)&slot_used[i], 0, __ATOMIC_SEQ_CST);
}

void safe_output_unlink_all(void) {
    for (int i = 0; i < SLOTS; i++)
        if (slot_used[i] == 1) unlink(slot_path[i]);
}

/* The mapped inputs: a small table (a process maps a model and its shards,
 * not thousands of files); one that does not fit is simply not noted, and
 * the commands' own checks (safe_output_check_inputs) still apply. */
#define MAPPED 256
static struct {
    unsigned long long dev, ino;
    unsigned count;
} mapped[MAPPED];
static pthread_mutex_t mapped_lock = PTHREAD_MUTEX_INITIALIZER;

void safe_output_note_input(unsigned long long dev, unsigned long long ino) {
    pthread_mutex_lock(&mapped_lock);
    int free_slot = -1;
    for (int i = 0; i < MAPPED; i++) {
        if (mapped[i].count && mapped[i].dev == dev && mapped[i].ino == ino) {
            mapped[i].count++;
            pthread_mutex_unlock(&mapped_lock);
            return;
        }
        if (!mapped[i].count && free_slot < 0) free_slot = i;
    }
    if (free_slot >= 0) {
        mapped[free_slot].dev = dev;
        mapped[free_slot].ino = ino;
        mapped[free_slot].count = 1;
    }
    pthread_mutex_unlock(&mapped_lock);
}

void safe_output_forget_input(unsigned long long dev, unsigned long long ino) {
    pthread_mutex_lock(&mapped_lock);
    for (int i = 0; i < MAPPED; i++)
        if (mapped[i].count && mapped[i].dev == dev && mapped[i].ino == ino) {
            mapped[i].count--;
            break;
        }
    pthread_mutex_unlock(&mapped_lock);
}

static bool is_mapped_input(const struct stat *st) {
    bool found = false;
    pthread_mutex_lock(&mapped_lock);
    for (int i = 0; i < MAPPED && !found; i++)
        found = mapped[i].count && mapped[i].dev == (unsigned long long)st->st_dev &&
                mapped[i].ino == (unsigned long long)st->st_ino;
    pthread_mutex_unlock(&mapped_lock);
    return found;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = mem_alloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* 1 when a regular file directly in dir is the file st. */
static int dir_holds(const char *dir, const struct stat *st) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        struct stat s;
        if (fstatat(dirfd(d), e->d_name, &s, 0) == 0 && S_ISREG(s.st_mode) && same_file(&s, st)) found = 1;
    }
    closedir(d);
    return found;
}

int safe_output_check_inputs(const char *out, const char *const *inputs, size_t n, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "no output path");
    struct stat so;
    if (stat(out, &so) != 0) return CLOVER_OK; /* a file that does not exist is no input */
    for (size_t i = 0; i < n; i++) {
        struct stat si;
        if (!inputs[i] || stat(inputs[i], &si) != 0) continue;
        if (same_file(&so, &si) || (S_ISDIR(si.st_mode) && S_ISREG(so.st_mode) && dir_holds(inputs[i], &so)))
            return error_set(err, CLOVER_E_INVALID,
                             "%s is also an input%s%s%s; writing it would destroy what is being read: choose another "
                             "output file",
                             out, strcmp(out, inputs[i]) ? " (" : "", strcmp(out, inputs[i]) ? inputs[i] : "",
                             strcmp(out, inputs[i]) ? ")" : "");
    }
    return CLOVER_OK;
}

const char *safe_output_writing_path(const safe_output *so) { return so->tmp ? so->tmp : so->target; }

int safe_output_open(safe_output *so, const char *path, clover_error *err) {
    memset(so, 0, sizeof *so);
    so->fd = -1;
    so->slot = -1;
    if (!path || !*path) return error_set(err, CLOVER_E_INVALID, "no output path");
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) return error_set(err, CLOVER_E_IO, "%s: cannot create: it is a directory", path);
        so->fd = open(path, O_WRONLY | O_CLOEXEC); /* a device or a FIFO: written as it is */
        if (so->fd < 0) return error_set(err, CLOVER_E_IO, "%s: cannot create: %s", path, strerror(errno));
        so->target = dup_str(path);
        if (!so->target) {
            close(so->fd);
            so->fd = -1;
            return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
        }
        return CLOVER_OK;
    }
    if (stat(path, &st) == 0 && is_mapped_input(&st)) /* stat follows a symlink to the file it names */
        return error_set(err, CLOVER_E_INVALID,
                         "%s is a model file this process is reading; writing it would destroy it: choose another "
                         "output file",
                         path);
    struct stat lst;
    char *resolved = NULL; /* a symlink is kept: the file it points at is replaced */
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) resolved = realpath(path, NULL);
    so->target = dup_str(resolved ? resolved : path);
    free(resolved);
    if (!so->target) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    const char *slash = strrchr(so->target, '/');
    size_t dir_len = slash ? (size_t)(slash - so->target) + 1 : 0;
    const char *base = slash ? slash + 1 : so->target;
    static const char suffix[] = ".clover-tmp-XXXXXX";
    size_t n = dir_len + 1 + strlen(base) + sizeof suffix;
    so->tmp = mem_alloc(n);
    if (!so->tmp) {
        safe_output_abort(so);
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(so->tmp, so->target, dir_len);
    so->tmp[dir_len] = '.';
    memcpy(so->tmp + dir_len + 1, base, strlen(base));
    memcpy(so->tmp + dir_len + 1 + strlen(base), suffix, sizeof suffix);
    so->fd = mkostemp(so->tmp, O_CLOEXEC);
    if (so->fd < 0) {
        int e = errno;
        mem_free(so->tmp);
        so->tmp = NULL;
        safe_output_abort(so);
        return error_set(err, CLOVER_E_IO, "%s: cannot create: %s", path, strerror(e));
    }
    so->slot = slot_take(so->tmp);
    mode_t mask = umask(022); /* mkstemp's 0600 becomes what a plain create would give */
    umask(mask);
    if (fchmod(so->fd, 0666 & ~mask) != 0) { /* best effort: the file is still ours */
    }
    return CLOVER_OK;
}

static void fsync_dir(const char *target) {
    const char *slash = strrchr(target, '/');
    char dir[SLOT_PATH];
    size_t n = slash ? (size_t)(slash - target) : 0;
    if (n >= sizeof dir) return;
    if (n == 0) {
        dir[0] = slash ? '/' : '.';
        dir[1] = 0;
    } else {
        memcpy(dir, target, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* the rename is durable; a failure here leaves a correct file */
        close(fd);
    }
}

int safe_output_commit(safe_output *so, clover_error *err) {
    int rc = CLOVER_OK;
    if (so->fd >= 0) {
        if (so->tmp && fsync(so->fd) != 0)
            rc = error_set(err, CLOVER_E_IO, "%s: cannot flush to disk: %s", so->target, strerror(errno));
        if (close(so->fd) != 0 && rc == CLOVER_OK && so->tmp)
            rc = error_set(err, CLOVER_E_IO, "%s: close failed: %s", so->target, strerror(errno));
        so->fd = -1;
    }
    if (rc == CLOVER_OK && so->tmp && rename(so->tmp, so->target) != 0)
        rc = error_set(err, CLOVER_E_IO, "%s: cannot move the finished file into place: %s", so->target,
                       strerror(errno));
    if (rc != CLOVER_OK) {
        safe_output_abort(so);
        return rc;
    }
    if (so->tmp) fsync_dir(so->target);
    slot_release(so->slot);
    so->slot = -1;
    mem_free(so->tmp);
    mem_free(so->target);
    so->tmp = so->target = NULL;
    return CLOVER_OK;
}

void safe_output_abort(safe_output *so) {
    if (so->fd >= 0) close(so->fd);
    so->fd = -1;
    if (so->tmp) unlink(so->tmp);
    slot_release(so->slot);
    so->slot = -1;
    mem_free(so->tmp);
    mem_free(so->target);
    so->tmp = so->target = NULL;
}
