//! What kind of file system a path is on.

use crate::error::{Error, Result};
use std::io;
use std::path::Path;

/// Whether `path` is on a shared (network, cluster or FUSE) file system,
/// from `statfs`: `true` for NFS, SMB/CIFS, Lustre, GPFS, BeeGFS, CephFS,
/// FUSE, 9p, AFS, OCFS2, GFS2, ... and for any type it does not know;
/// `false` for known local ones (ext2/3/4, xfs, btrfs, tmpfs, overlayfs,
/// zfs, f2fs, ...).
///
/// On a shared file system inotify only sees this host's writes: helpers
/// must poll `open.ron` instead of watching it.
pub fn is_shared_fs(path: &Path) -> Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            Error::argument("path", format!("{} contains a NUL byte", path.display()))
        })?;
        // SAFETY: `c` is a valid C string and `st` a writable statfs buffer.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
            return Err(Error::io(path, io::Error::last_os_error()));
        }
        #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between targets
        let magic = st.f_type as u64 & 0xffff_ffff;
        Ok(is_shared_type(magic))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Ok(true)
    }
}

/// Known local file-system magic numbers (`statfs.f_type`).
const LOCAL_FS: &[u64] = &[
    0xef53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683e, // btrfs
    0x0102_1994, // tmpfs
    0x8584_58f6, // ramfs
    0x794c_7630, // overlayfs
    0x2fc1_2fc1, // zfs
    0xf2f5_2010, // f2fs
    0xca45_1a4e, // bcachefs
    0x3153_464a, // jfs
    0x5265_4973, // reiserfs
    0x3434,      // nilfs
    0x4d44,      // vfat / msdos
    0x2011_bab0, // exfat
    0x5346_544e, // ntfs
    0x7366_746e, // ntfs3
    0x9660,      // iso9660
    0x7371_7368, // squashfs
];

fn is_shared_type(magic: u64) -> bool {
    !LOCAL_FS.contains(&magic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_system_types() {
        assert!(!is_shared_type(0xef53));
        assert!(!is_shared_type(0x0102_1994));
        assert!(is_shared_type(0x6969)); // nfs
        assert!(is_shared_type(0x0bd0_0bd0)); // lustre
        assert!(is_shared_type(0x1234_5678)); // unknown
        assert!(is_shared_fs(Path::new("/no/such/dir")).is_err());
    }
}
