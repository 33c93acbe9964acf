//! The backends' CPU quotas on either cgroup hierarchy: v2's `cpu.max` in a group the
//! testbed may write, or v1's CFS quota under the cpu controller's own mount.
//!
//! [`Cgroups::detect`] reads `/proc/self/mountinfo` for the hierarchy that holds the cpu
//! controller (a machine has at most one: a cgroup2 mount whose `cgroup.controllers` lists
//! `cpu`, or a v1 `cgroup` mount with the `cpu` option) and `/proc/self/cgroup` for this
//! process's own v2 group. [`Cgroups::fleet`] makes one group per fleet and
//! [`FleetGroup::backend`] one leaf per backend with its quota; dropping the
//! [`FleetGroup`] removes them. Everything takes its paths from those two texts, so the
//! tests run it against a fake tree in a scratch directory.
//!
//! Where the groups go:
//!
//! * **v2**: under the parent of this process's own group (a sibling of it), or under
//!   `LIVECOUNT_TESTBED_CGROUP`. That parent must list `cpu` in `cgroup.controllers`, and
//!   its `cgroup.procs` must be writable: v2 moves a process only for a writer of the
//!   `cgroup.procs` of the common ancestor of both groups. The fleet's group enables `+cpu`
//!   for its children, and so does the parent if it has not already: v2's "no internal
//!   processes" rule lets only a group without processes of its own do that, which is why
//!   the backends are leaves under a fleet group and not beside this process. A `+cpu` the
//!   testbed writes into the parent stays when it leaves: another group may rely on it by
//!   then.
//! * **v1**: under the cpu controller's mount point, or under `LIVECOUNT_TESTBED_CGROUP`.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The CFS period of every backend's quota: short, so a saturated backend is throttled in
/// small steps (10 ms), not held off for most of a default 100 ms period.
pub const CFS_PERIOD_US: u64 = 10_000;

/// The smallest quota the kernel takes (1 ms per period).
const MIN_QUOTA_US: u64 = 1_000;

/// The environment variable naming the group to put the fleets' groups under.
pub const PARENT_VAR: &str = "LIVECOUNT_TESTBED_CGROUP";

/// Which cgroup hierarchy holds the cpu controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Flavour {
    /// cgroup v1: a `cgroup` mount of its own for the cpu controller, quotas in
    /// `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    V1,
    /// cgroup v2: one unified hierarchy, the quota in `cpu.max`.
    V2,
}

impl Flavour {
    /// How a report names the quota: "cgroup v1 `cpu.cfs_quota_us`", "cgroup v2 `cpu.max`".
    pub fn quota(self) -> &'static str {
        match self {
            Flavour::V1 => "cgroup v1 `cpu.cfs_quota_us`",
            Flavour::V2 => "cgroup v2 `cpu.max`",
        }
    }
}

/// This machine's cpu controller and the group the fleets' groups go under.
#[derive(Debug, Clone)]
pub struct Cgroups {
    flavour: Flavour,
    /// Where the fleets' groups are made.
    parent: PathBuf,
    /// Why there, for a refusal: "the parent of this process's group /a/b".
    chosen: String,
}

impl Cgroups {
    /// This process's hierarchy: `/proc/self/mountinfo`, `/proc/self/cgroup` and
    /// [`PARENT_VAR`].
    pub fn detect() -> Result<Cgroups, String> {
        let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
        let configured = std::env::var_os(PARENT_VAR).map(PathBuf::from);
        Cgroups::find(
            &read("/proc/self/mountinfo")?,
            &read("/proc/self/cgroup")?,
            configured,
        )
    }

    /// The hierarchy `mountinfo` (as `/proc/self/mountinfo` reads) mounts with the cpu
    /// controller, and where the fleets' groups go: `configured`, else (v2) the parent of
    /// the group `own` (as `/proc/self/cgroup` reads) names, or (v1) the mount point.
    pub fn find(
        mountinfo: &str,
        own: &str,
        configured: Option<PathBuf>,
    ) -> Result<Cgroups, String> {
        let mounts = mounts(mountinfo);
        let v2 = mounts
            .iter()
            .find(|m| m.fstype == "cgroup2" && offers_cpu(&m.point));
        let v1 = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpu"));
        let (flavour, mount) = match (v2, v1) {
            (Some(m), _) => (Flavour::V2, m),
            (None, Some(m)) => (Flavour::V1, m),
            (None, None) => return Err(no_hierarchy(&mounts)),
        };
        if let Some(parent) = configured {
            return Ok(Cgroups {
                flavour,
                parent,
                chosen: format!("{PARENT_VAR} names it"),
            });
        }
        let (parent, chosen) = match flavour {
            Flavour::V1 => (
                mount.point.clone(),
                "the cpu controller's mount point".into(),
            ),
            Flavour::V2 => own_parent(mount, own)?,
        };
        Ok(Cgroups {
            flavour,
            parent,
            chosen,
        })
    }

    /// The hierarchy found.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// The group the fleets' groups go under.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Makes the group `name` for one fleet under [`parent`](Self::parent), ready for its
    /// backends' leaves; refuses, saying what is missing and how to get it, where the
    /// hierarchy does not let this process set quotas there.
    pub fn fleet(&self, name: &str) -> Result<FleetGroup, String> {
        if !self.parent.is_dir() {
            let missing = format!("{} is not a directory", self.parent.display());
            return Err(self.refuse(missing));
        }
        match self.flavour {
            Flavour::V1 => self.fleet_v1(name),
            Flavour::V2 => self.fleet_v2(name),
        }
    }

    fn fleet_v1(&self, name: &str) -> Result<FleetGroup, String> {
        // Every v1 cpu group has the quota's file when the kernel has CFS bandwidth control.
        let quota = self.parent.join("cpu.cfs_quota_us");
        if !quota.exists() {
            return Err(self.refuse(format!(
                "{} does not exist: this kernel has no CFS bandwidth control \
                 (CONFIG_CFS_BANDWIDTH)",
                quota.display()
            )));
        }
        self.make_group(name)
    }

    fn fleet_v2(&self, name: &str) -> Result<FleetGroup, String> {
        if !offers_cpu(&self.parent) {
            return Err(self.refuse(format!(
                "{} does not list cpu: the cpu controller is not enabled for {} (its \
                 parent's cgroup.subtree_control lacks +cpu)",
                self.parent.join("cgroup.controllers").display(),
                self.parent.display()
            )));
        }
        let procs = self.parent.join("cgroup.procs");
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(&procs) {
            return Err(self.refuse(format!(
                "{} is not writable ({e}): cgroup v2 moves a process into the backends' \
                 groups only for a writer of that file",
                procs.display()
            )));
        }
        let group = self.make_group(name)?;
        if !lists_cpu(&self.parent.join("cgroup.subtree_control")) {
            enable_cpu(&self.parent).map_err(|e| self.refuse(e))?;
        }
        enable_cpu(&group.path).map_err(|e| self.refuse(e))?;
        Ok(group)
    }

    fn make_group(&self, name: &str) -> Result<FleetGroup, String> {
        let path = self.parent.join(name);
        make_dir(&path).map_err(|e| self.refuse(format!("cannot create {e}")))?;
        Ok(FleetGroup {
            flavour: self.flavour,
            path,
            leaves: Vec::new(),
        })
    }

    /// `what` went wrong, then what the testbed needs of this hierarchy and how to get it.
    fn refuse(&self, what: String) -> String {
        let parent = self.parent.display();
        let how = match self.flavour {
            Flavour::V1 => format!(
                "The testbed sets its backends' CPU quotas with cgroup v1's cpu controller, \
                 under {parent} ({}): run it as root (in a container, one that mounts \
                 /sys/fs/cgroup read-write, e.g. docker run --privileged), or name a \
                 writable group under the cpu mount with {PARENT_VAR}=<dir>.",
                self.chosen
            ),
            Flavour::V2 => format!(
                "The testbed sets its backends' CPU quotas with cgroup v2's cpu.max, in \
                 groups under {parent} ({}), which must be writable, list cpu in its \
                 cgroup.controllers and hold no processes of its own: run it as root, or in \
                 a delegated subtree (systemd-run --user --scope -p Delegate=yes \
                 target/release/lbtestbed ...), or name such a group with \
                 {PARENT_VAR}=/sys/fs/cgroup/<path>.",
                self.chosen
            ),
        };
        format!("{what}. {how}")
    }
}

/// One fleet's group; dropping it removes its backends' leaves and then itself (their
/// processes must be gone by then: the kernel keeps a group that has any).
#[derive(Debug)]
pub struct FleetGroup {
    flavour: Flavour,
    path: PathBuf,
    leaves: Vec<PathBuf>,
}

impl FleetGroup {
    /// The hierarchy the group is in.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// The fleet's group.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the leaf `name` with a quota of `cores` (at least 0.1 of a core per 10 ms
    /// period, the kernel's minimum) and returns it, for the backend's `cgroup.procs`.
    pub fn backend(&mut self, name: &str, cores: f64) -> Result<PathBuf, String> {
        let leaf = self.path.join(name);
        make_dir(&leaf).map_err(|e| format!("cannot create {e}"))?;
        self.leaves.push(leaf.clone());
        let quota = ((cores * CFS_PERIOD_US as f64).round() as u64).max(MIN_QUOTA_US);
        match self.flavour {
            Flavour::V1 => {
                write(&leaf.join("cpu.cfs_period_us"), &CFS_PERIOD_US.to_string())?;
                write(&leaf.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
            Flavour::V2 => write(&leaf.join("cpu.max"), &format!("{quota} {CFS_PERIOD_US}"))?,
        }
        Ok(leaf)
    }
}

impl Drop for FleetGroup {
    fn drop(&mut self) {
        for leaf in self.leaves.iter().rev() {
            remove_group(leaf);
        }
        remove_group(&self.path);
    }
}

// === the mounts and the groups' files ===

/// One line of `/proc/self/mountinfo`: the mounted directory of the filesystem, where it
/// is mounted, its type and its superblock options.
#[derive(Debug)]
struct Mount {
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    options: String,
}

/// Every line of `mountinfo` that parses: `id parent dev root point options [optional…]
/// - fstype source superblock-options` (proc(5)).
fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut left = left.split(' ').skip(3);
            let mut right = right.split(' ');
            Some(Mount {
                root: PathBuf::from(unescape(left.next()?)),
                point: PathBuf::from(unescape(left.next()?)),
                fstype: right.next()?.to_owned(),
                options: right.nth(1)?.to_owned(),
            })
        })
        .collect()
}

/// A mountinfo path with its octal escapes (`\040` for a space, …) undone.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out += &rest[..i];
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out + rest
}

/// The v2 group the fleets go under by default, and why: the parent of this process's
/// group (`0::<path>` in `own`), or the mount point where this process's group is the
/// mount's root.
fn own_parent(mount: &Mount, own: &str) -> Result<(PathBuf, String), String> {
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| {
            format!("/proc/self/cgroup has no cgroup v2 line (0::<path>); name a group with {PARENT_VAR}")
        })?;
    let relative = Path::new(path).strip_prefix(&mount.root).map_err(|_| {
        format!(
            "this process's cgroup v2 group {path} is outside the hierarchy mounted at {} \
             (its root is {}); name a group with {PARENT_VAR}",
            mount.point.display(),
            mount.root.display()
        )
    })?;
    let mine = mount.point.join(relative);
    Ok(match mine.parent() {
        Some(parent) if mine != mount.point => (
            parent.to_owned(),
            format!("the parent of this process's group {path}"),
        ),
        _ => (
            mine,
            format!("this process's group {path}, the hierarchy's root"),
        ),
    })
}

/// Whether the group at `dir` can give its children the cpu controller.
fn offers_cpu(dir: &Path) -> bool {
    lists_cpu(&dir.join("cgroup.controllers"))
}

/// Whether the controller list in `file` (`cpuset cpu io`, `+cpu`) names cpu.
fn lists_cpu(file: &Path) -> bool {
    std::fs::read_to_string(file).is_ok_and(|s| {
        s.split_whitespace()
            .any(|c| c.trim_start_matches('+') == "cpu")
    })
}

/// Writes `+cpu` into `group`'s `cgroup.subtree_control`.
fn enable_cpu(group: &Path) -> Result<(), String> {
    let file = group.join("cgroup.subtree_control");
    std::fs::write(&file, "+cpu").map_err(|e| subtree_refusal(&file, &e))
}

/// Why writing `+cpu` into `file` failed, in cgroup v2's terms.
fn subtree_refusal(file: &Path, e: &std::io::Error) -> String {
    let why = match e.kind() {
        ErrorKind::ResourceBusy => format!(
            ": {} holds processes of its own, and cgroup v2 enables no controller for the \
             children of a group that does",
            file.parent().unwrap_or(file).display()
        ),
        _ => String::new(),
    };
    format!("writing +cpu to {} failed ({e}){why}", file.display())
}

/// The refusal when no mount offers the cpu controller: what each kind of mount showed.
fn no_hierarchy(mounts: &[Mount]) -> String {
    let v2: Vec<String> = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .map(|m| m.point.join("cgroup.controllers").display().to_string())
        .collect();
    let v2 = if v2.is_empty() {
        "no cgroup2 mount".to_owned()
    } else {
        format!("no cpu in {}", v2.join(", "))
    };
    format!(
        "the testbed limits each backend with a CPU quota and /proc/self/mountinfo shows no \
         hierarchy with the cpu controller: {v2}, and no cgroup (v1) mount with the cpu \
         option. Run it where /sys/fs/cgroup mounts cgroup v2 with cpu (any current \
         distribution; a container needs it read-write, e.g. docker run --privileged) or v1's \
         cpu controller."
    )
}

/// Creates the group at `path` (one that exists already is fine: a rerun of the same
/// process id and tag); the error names the path.
fn make_dir(path: &Path) -> Result<(), String> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Removes the group at `path`, retrying for up to 100 ms while the kernel still counts a
/// just-reaped process in it (EBUSY; runc retries the same way).
fn remove_group(path: &Path) {
    for _ in 0..20 {
        match std::fs::remove_dir(path) {
            Err(e) if e.kind() == ErrorKind::ResourceBusy => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests;
