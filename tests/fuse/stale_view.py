#!/usr/bin/python3
"""A view of a directory as an NFSv3 client sees it, for tests/fuse.rs.

NFSv3 servers keep no open state: a file that another client removes, or
renames another file over, while this client has it open, is gone on the
server, and this client's next read of it fails with ESTALE. Removals made
through this view keep its own open files readable (the client's "silly
rename"). Every read first waits a round trip to the server (--rtt).

Usage: stale_view.py SOURCE MOUNTPOINT [--rtt SECONDS] [--count FILE]
(--count: a line is appended to FILE at each ESTALE returned). Runs in the
foreground until unmounted (fusermount3 -u MOUNTPOINT).
"""

import argparse
import errno
import os
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class StaleView(Operations):
    def __init__(self, source, rtt, count):
        self.source = source
        self.rtt = rtt
        self.count = count
        self.removed = set()  # (dev, ino) of files removed through this view
        self.mutex = threading.Lock()

    def _path(self, path):
        return os.path.join(self.source, path.lstrip("/"))

    def _removing(self, path):
        """Note the file at `path` (about to go) as removed by this client."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        with self.mutex:
            self.removed.add((st.st_dev, st.st_ino))

    # Names.
    def getattr(self, path, fi=None):
        st = os.fstat(fi.fh) if fi else os.lstat(self._path(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                "st_atime", "st_mtime", "st_ctime", "st_ino", "st_dev")
        return {k: getattr(st, k) for k in keys}

    def access(self, path, mode):
        if not os.access(self._path(path), mode):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path, fi):
        return [".", ".."] + os.listdir(self._path(path))

    def readlink(self, path):
        return os.readlink(self._path(path))

    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)

    def rmdir(self, path):
        os.rmdir(self._path(path))

    def mknod(self, path, mode, dev):
        os.mknod(self._path(path), mode, dev)

    def unlink(self, path):
        self._removing(self._path(path))
        os.unlink(self._path(path))

    def rename(self, old, new):
        self._removing(self._path(new))
        os.rename(self._path(old), self._path(new))

    def link(self, target, source):
        os.link(self._path(source), self._path(target))

    def symlink(self, target, source):
        os.symlink(source, self._path(target))

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)

    def chown(self, path, uid, gid):
        os.lchown(self._path(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._path(path), times, follow_symlinks=False)

    def statfs(self, path):
        st = os.statvfs(self._path(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}

    # Files.
    def open(self, path, fi):
        fi.fh = os.open(self._path(path), fi.flags)
        return 0

    def create(self, path, mode, fi):
        fi.fh = os.open(self._path(path), fi.flags | os.O_CREAT, mode)
        return 0

    def read(self, path, size, offset, fi):
        time.sleep(self.rtt)
        st = os.fstat(fi.fh)
        with self.mutex:
            stale = st.st_nlink == 0 and (st.st_dev, st.st_ino) not in self.removed
        if stale:
            if self.count:
                with open(self.count, "a") as f:
                    f.write(f"{path}\n")
            raise FuseOSError(errno.ESTALE)
        return os.pread(fi.fh, size, offset)

    def write(self, path, data, offset, fi):
        return os.pwrite(fi.fh, data, offset)

    def truncate(self, path, length, fi=None):
        if fi:
            os.ftruncate(fi.fh, length)
        else:
            os.truncate(self._path(path), length)

    def flush(self, path, fi):
        return 0

    def fsync(self, path, datasync, fi):
        os.fsync(fi.fh)

    def release(self, path, fi):
        os.close(fi.fh)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("mountpoint")
    p.add_argument("--rtt", type=float, default=0.0)
    p.add_argument("--count")
    a = p.parse_args()
    view = StaleView(os.path.abspath(a.source), a.rtt, a.count)
    FUSE(view, a.mountpoint, foreground=True, allow_other=True, raw_fi=True)


if __name__ == "__main__":
    main()
