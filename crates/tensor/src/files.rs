//! The files a user names: inputs are opened only when they are regular files, outputs are
//! replaced atomically through a temporary file (Note [Output files]).

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Error, ErrorKind, Write};
use std::path::{Path, PathBuf};

// Note [Input files]
// A path given as an input must name a regular file. A FIFO would block the reader until some
// other process writes to it (and a device may never end); a directory fails later with a
// confusing message. The file is opened with O_NONBLOCK, so that opening a FIFO returns at once
// instead of waiting for a writer, and the open file (not the path, which could be swapped in
// between) is checked; O_NONBLOCK has no effect on reading a regular file.

// Note [Output files]
// Every file the tool writes goes through `write_output_file`, which
// - follows symlinks to their final target and writes that, so a link stays a link and its
//   target gets the new contents (as `cat > link` would);
// - refuses a target that is not a regular file (a FIFO, a socket, a device, a directory):
//   replacing it would destroy something that is not data, writing into it could block;
// - refuses a target that is one of the run's inputs (same device and inode, whatever the
//   path's spelling), so that a slip such as `--trace-graph data.json` cannot destroy the
//   input; a caller that reads its input whole first and means to replace it (`call --in x
//   --out x`) does not list it;
// - writes the bytes to a new temporary file in the target's directory, flushes it to disk,
//   gives it the target's permission bits (a 0600 file stays 0600; a new file gets the usual
//   0666 less the umask) and, when it can, the target's owner, then renames it onto the target:
//   a failure at any point (a full disk, a crash) leaves the previous file whole, never a
//   partial one.
// Hard links: a rename gives the target a new inode, so other names of a hard-linked file keep
// the previous contents. Writing in place would keep the links but cannot be atomic: a full
// disk halfway would leave a truncated file under every name. Atomic replacement is what
// `sed -i`, rsync, git and most editors' default saves do; the caller is told how many other
// links were left with the previous contents ([`Written::other_links`]) so it can say so.

/// At most this many symlinks are followed (Linux's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// What a file that is not a regular file is, for messages.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    "not a regular file"
}

/// The error for a path that is `meta` and not a regular file.
fn not_regular(meta: &Metadata, role: &str) -> Error {
    let kind = kind_of(meta);
    let kind = if kind.starts_with("not ") {
        kind.to_owned()
    } else {
        format!("{kind}, not a regular file")
    };
    Error::new(ErrorKind::InvalidInput, format!("{kind}; {role}"))
}

/// Opens `path` for reading if it is a regular file (Note [Input files]); otherwise an error
/// saying what it is (`a FIFO (named pipe), not a regular file; ...`).
pub fn open_input_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta, "an input must be a regular file"));
    }
    Ok(file)
}

/// What [`write_output_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The file written: the path given, or the final target of its symlinks.
    pub target: PathBuf,
    /// Other hard links of the replaced file, which keep its previous contents (Note [Output
    /// files]).
    pub other_links: u64,
}

impl Written {
    /// A line for the user when other hard links keep the previous contents (Note [Output
    /// files]), else nothing.
    pub fn note(&self) -> String {
        match self.other_links {
            0 => String::new(),
            n => format!(
                "note: {} had {n} other hard link(s), which keep the previous contents (the \
                 file is replaced atomically, not rewritten in place)\n",
                self.target.display()
            ),
        }
    }
}

/// `path` with its symlinks followed to the final target, which may not exist yet (a dangling
/// link names the file to create).
fn resolve_symlinks(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINK_HOPS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(Error::other(format!(
        "more than {MAX_SYMLINK_HOPS} levels of symbolic links"
    )))
}

/// Whether the paths `a` and `b` name the same existing file (through symlinks, hard links
/// and any spelling of the path).
pub fn is_same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => same_file(&a, &b),
        _ => false,
    }
}

/// Whether `a` and `b` are the same file.
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// Writes `bytes` to the file `path` atomically, through its symlinks, keeping its
/// permissions, refusing special files and any of `inputs` (Note [Output files]).
pub fn write_output_file(path: &Path, bytes: &[u8], inputs: &[&Path]) -> std::io::Result<Written> {
    let target = resolve_symlinks(path)?;
    let existing = match std::fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(meta) = &existing {
        if !meta.is_file() {
            return Err(not_regular(meta, "refusing to replace it"));
        }
        for input in inputs {
            let same = std::fs::metadata(input).is_ok_and(|m| same_file(meta, &m));
            if same {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "it is the input {}; refusing to overwrite an input",
                        input.display()
                    ),
                ));
            }
        }
    }
    let name = target
        .file_name()
        .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "not a file name"))?;
    let tmp = target.with_file_name(temporary_name(name));
    let written = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Some(meta) = &existing {
            keep_owner_and_permissions(&file, meta)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_directory(&target);
    Ok(Written {
        target,
        other_links: existing.map_or(0, |m| link_count(&m).saturating_sub(1)),
    })
}

/// `.NAME.PID.N.tmp`: hidden, and unique within and across processes.
fn temporary_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    tmp
}

/// Gives `file` the permission bits of `meta` and, when allowed (as root, or for a group the
/// user is in), its owner and group.
fn keep_owner_and_permissions(file: &File, meta: &Metadata) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // Not ours to give away unless privileged: the file then stays the writer's, as a
        // file any editor saves does.
        let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
    }
    file.set_permissions(meta.permissions())
}

fn link_count(meta: &Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.nlink()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        1
    }
}

/// Flushes the rename to disk (best effort: some file systems cannot open a directory).
fn sync_directory(target: &Path) {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sb-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    #[test]
    fn writes_through_symlinks_keeping_permissions() {
        let d = dir("symlink");
        let target = d.0.join("target.bin");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = d.0.join("link.bin");
        std::os::unix::fs::symlink("target.bin", &link).unwrap();
        let w = write_output_file(&link, b"new", &[]).unwrap();
        assert_eq!(w.target, target);
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
        // A dangling link names the file to create.
        let dangling = d.0.join("dangling.bin");
        std::os::unix::fs::symlink("created.bin", &dangling).unwrap();
        write_output_file(&dangling, b"x", &[]).unwrap();
        assert_eq!(std::fs::read(d.0.join("created.bin")).unwrap(), b"x");
        // Nothing but the files: no temporary left.
        let mut names: Vec<_> = std::fs::read_dir(&d.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["created.bin", "dangling.bin", "link.bin", "target.bin"]
        );
    }

    #[test]
    fn refuses_inputs_special_files_and_loops() {
        let d = dir("refuse");
        let input = d.0.join("in.json");
        std::fs::write(&input, b"data").unwrap();
        let alias = d.0.join("alias.json");
        std::fs::hard_link(&input, &alias).unwrap();
        let e = write_output_file(&alias, b"x", &[&input]).unwrap_err();
        assert!(
            e.to_string().contains("refusing to overwrite an input"),
            "{e}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), b"data");
        // Not an input: replaced, and the other link keeps the old contents.
        let w = write_output_file(&alias, b"x", &[]).unwrap();
        assert_eq!(w.other_links, 1);
        assert_eq!(std::fs::read(&input).unwrap(), b"data");
        let e = write_output_file(&d.0, b"x", &[]).unwrap_err();
        assert!(
            e.to_string().starts_with("a directory, not a regular file"),
            "{e}"
        );
        let e = write_output_file(Path::new("/dev/null"), b"x", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a character device, not a regular file; refusing to replace it"
        );
        let a = d.0.join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", d.0.join("b")).unwrap();
        let e = write_output_file(&a, b"x", &[]).unwrap_err();
        assert!(e.to_string().contains("levels of symbolic links"), "{e}");
    }

    #[test]
    fn inputs_must_be_regular_files() {
        let e = open_input_file(Path::new("/dev/null")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a character device, not a regular file; an input must be a regular file"
        );
        let e = open_input_file(&std::env::temp_dir()).unwrap_err();
        assert!(e.to_string().starts_with("a directory"), "{e}");
    }
}
