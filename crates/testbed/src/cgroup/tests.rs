//! Both hierarchies against fake cgroup trees in a scratch directory: where the groups go,
//! the exact contents of every file written, the removal on drop and the refusals.

use std::io;
use std::path::{Path, PathBuf};

use super::*;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("livecount-cgroup-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `contents` to `path` under the scratch directory, making its directories.
    fn put(&self, path: &str, contents: &str) -> PathBuf {
        let file = self.0.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, contents).unwrap();
        file
    }

    fn path(&self, path: &str) -> PathBuf {
        self.0.join(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A unified hierarchy at `v2/` as a systemd machine shows it to a process in
/// `/user.slice/me.scope`: the root offers cpu, `user.slice` has it and enables only
/// memory and pids for its children. Returns the mountinfo and `/proc/self/cgroup` texts.
fn v2_tree(s: &Scratch) -> (String, &'static str) {
    s.put("v2/cgroup.controllers", "cpuset cpu io memory pids\n");
    s.put("v2/cgroup.subtree_control", "cpu memory pids\n");
    s.put("v2/user.slice/cgroup.controllers", "cpu memory pids\n");
    s.put("v2/user.slice/cgroup.subtree_control", "memory pids\n");
    s.put("v2/user.slice/cgroup.procs", "");
    s.put("v2/user.slice/me.scope/cgroup.procs", "4242\n");
    let mountinfo = format!(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
         35 24 0:30 / {} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 \
         rw,nsdelegate,memory_recursiveprot\n",
        s.path("v2").display()
    );
    (mountinfo, "0::/user.slice/me.scope\n")
}

/// This machine's layout: v1 controllers each on its own mount (cpu with cpuacct here)
/// beside a cgroup2 mount without controllers. Returns the mountinfo and
/// `/proc/self/cgroup` texts.
fn hybrid_tree(s: &Scratch) -> (String, &'static str) {
    s.put("fs/unified/cgroup.controllers", "\n");
    s.put("fs/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    s.put("fs/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    s.put("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");
    let fs = s.path("fs");
    let mountinfo = format!(
        "31 23 0:28 / {fs} rw,relatime - tmpfs tmpfs rw,mode=755\n\
         32 31 0:29 / {fs}/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
         35 31 0:32 / {fs}/memory rw,relatime - cgroup cgroup rw,memory\n\
         41 31 0:38 / {fs}/unified rw,relatime - cgroup2 cgroup2 rw\n",
        fs = fs.display()
    );
    (mountinfo, "1:cpu,cpuacct:/\n4:memory:/\n0::/\n")
}

/// What the kernel does on rmdir of an empty group: its interface files go with it. A
/// fake tree's files are ordinary ones, so they are removed first.
fn forget_files(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            forget_files(&path);
        } else {
            std::fs::remove_file(path).unwrap();
        }
    }
}

// === where the groups go ===

#[test]
fn v2_groups_go_beside_this_process() {
    let s = Scratch::new("v2_beside");
    let (mountinfo, own) = v2_tree(&s);
    let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
    assert_eq!(cgroups.flavour(), Flavour::V2);
    assert_eq!(cgroups.parent(), s.path("v2/user.slice"));
}

#[test]
fn v2_at_the_root_of_a_namespace_goes_at_the_root() {
    let s = Scratch::new("v2_root");
    let (mountinfo, _) = v2_tree(&s);
    let cgroups = Cgroups::find(&mountinfo, "0::/\n", None).unwrap();
    assert_eq!(cgroups.parent(), s.path("v2"));
}

#[test]
fn v2_mounted_from_a_subtree_strips_the_mounts_root() {
    let s = Scratch::new("v2_subtree");
    s.put("v2/cgroup.controllers", "cpu\n");
    let mountinfo = format!(
        "35 24 0:30 /docker/abc {} rw - cgroup2 cgroup2 rw\n",
        s.path("v2").display()
    );
    let cgroups = Cgroups::find(&mountinfo, "0::/docker/abc/init.scope\n", None).unwrap();
    assert_eq!(cgroups.parent(), s.path("v2"));
    let outside = Cgroups::find(&mountinfo, "0::/elsewhere\n", None).unwrap_err();
    assert!(outside.contains("/elsewhere is outside"), "{outside}");
    assert!(outside.contains(PARENT_VAR), "{outside}");
}

#[test]
fn a_configured_group_wins() {
    let s = Scratch::new("configured");
    let (mountinfo, own) = v2_tree(&s);
    let mine = s.path("v2/user.slice/me.scope/delegated");
    let cgroups = Cgroups::find(&mountinfo, own, Some(mine.clone())).unwrap();
    assert_eq!(cgroups.parent(), mine);
}

#[test]
fn a_hybrid_machine_uses_v1s_cpu_mount() {
    let s = Scratch::new("hybrid");
    let (mountinfo, own) = hybrid_tree(&s);
    let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
    assert_eq!(cgroups.flavour(), Flavour::V1);
    assert_eq!(cgroups.parent(), s.path("fs/cpu,cpuacct"));
}

#[test]
fn mountinfo_escapes_are_undone() {
    assert_eq!(
        unescape(r"/sys/fs/cgroup/a\040b\134c"),
        r"/sys/fs/cgroup/a b\c"
    );
    assert_eq!(unescape(r"/trailing\"), r"/trailing\");
    let m = mounts("1 2 0:3 / /a\\040b rw - cgroup2 none rw\nnot a mount line\n");
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].point, Path::new("/a b"));
    assert_eq!(m[0].options, "rw");
}

// === the files written ===

#[test]
fn v2_enables_cpu_down_to_the_leaves_and_writes_cpu_max() {
    let s = Scratch::new("v2_files");
    let (mountinfo, own) = v2_tree(&s);
    let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
    let mut fleet = cgroups.fleet("livecount-testbed-1-run").unwrap();
    let group = s.path("v2/user.slice/livecount-testbed-1-run");
    assert_eq!(fleet.path(), group);
    assert_eq!(
        read(&s.path("v2/user.slice/cgroup.subtree_control")),
        "+cpu"
    );
    assert_eq!(read(&group.join("cgroup.subtree_control")), "+cpu");
    assert_eq!(fleet.backend("b1", 0.25).unwrap(), group.join("b1"));
    assert_eq!(read(&group.join("b1/cpu.max")), "2500 10000");
    fleet.backend("b2", 0.01).unwrap();
    assert_eq!(
        read(&group.join("b2/cpu.max")),
        "1000 10000",
        "the kernel's minimum"
    );
    assert!(!group.join("b1/cpu.cfs_quota_us").exists());
}

#[test]
fn v2_leaves_a_parent_that_enables_cpu_already_alone() {
    let s = Scratch::new("v2_enabled");
    let (mountinfo, own) = v2_tree(&s);
    s.put("v2/user.slice/cgroup.subtree_control", "cpu memory pids\n");
    let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
    let _fleet = cgroups.fleet("fleet").unwrap();
    let parent = read(&s.path("v2/user.slice/cgroup.subtree_control"));
    assert_eq!(parent, "cpu memory pids\n");
}

#[test]
fn v1_writes_the_cfs_period_and_quota() {
    let s = Scratch::new("v1_files");
    let (mountinfo, own) = hybrid_tree(&s);
    let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
    let mut fleet = cgroups.fleet("livecount-testbed-1-run").unwrap();
    let group = s.path("fs/cpu,cpuacct/livecount-testbed-1-run");
    assert_eq!(fleet.path(), group);
    let leaf = fleet.backend("b1", 0.2).unwrap();
    assert_eq!(leaf, group.join("b1"));
    assert_eq!(read(&leaf.join("cpu.cfs_period_us")), "10000");
    assert_eq!(read(&leaf.join("cpu.cfs_quota_us")), "2000");
    let small = fleet.backend("b2", 0.05).unwrap();
    assert_eq!(
        read(&small.join("cpu.cfs_quota_us")),
        "1000",
        "the kernel's minimum"
    );
    assert!(!leaf.join("cpu.max").exists());
    assert!(!group.join("cgroup.subtree_control").exists());
}

#[test]
fn dropping_a_fleet_removes_its_groups_and_nothing_else() {
    for (name, tree) in [
        ("drop_v2", v2_tree as fn(&Scratch) -> _),
        ("drop_v1", hybrid_tree),
    ] {
        let s = Scratch::new(name);
        let (mountinfo, own) = tree(&s);
        let cgroups = Cgroups::find(&mountinfo, own, None).unwrap();
        let mut fleet = cgroups.fleet("fleet").unwrap();
        fleet.backend("b1", 0.1).unwrap();
        fleet.backend("b2", 0.2).unwrap();
        let group = fleet.path().to_owned();
        forget_files(&group);
        drop(fleet);
        assert!(!group.exists(), "{name}: {} is left", group.display());
        assert!(cgroups.parent().is_dir(), "{name}: the parent went too");
    }
}

// === the refusals ===

#[test]
fn no_cpu_controller_anywhere_is_refused_naming_what_was_seen() {
    let s = Scratch::new("none");
    let (mountinfo, own) = hybrid_tree(&s);
    let without_cpu = mountinfo.replace("rw,cpu,cpuacct", "rw,cpuacct");
    let e = Cgroups::find(&without_cpu, own, None).unwrap_err();
    let unified = s.path("fs/unified/cgroup.controllers");
    assert!(
        e.contains(&format!("no cpu in {}", unified.display())),
        "{e}"
    );
    assert!(
        e.contains("no cgroup (v1) mount with the cpu option"),
        "{e}"
    );
    let e = Cgroups::find("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", own, None).unwrap_err();
    assert!(e.contains("no cgroup2 mount"), "{e}");
}

#[test]
fn a_configured_group_that_is_not_there_is_refused_as_such() {
    let s = Scratch::new("configured_missing");
    let (mountinfo, own) = hybrid_tree(&s);
    let missing = s.path("fs/cpu,cpuacct/typo");
    let cgroups = Cgroups::find(&mountinfo, own, Some(missing.clone())).unwrap();
    let e = cgroups.fleet("fleet").unwrap_err();
    assert_starts(&e, &format!("{} is not a directory.", missing.display()));
    assert!(e.contains("LIVECOUNT_TESTBED_CGROUP names it"), "{e}");
}

#[test]
fn v2_refuses_a_parent_without_cpu() {
    let s = Scratch::new("v2_no_cpu");
    let (mountinfo, own) = v2_tree(&s);
    s.put("v2/user.slice/cgroup.controllers", "memory pids\n");
    let e = refusal(&mountinfo, own);
    let file = s.path("v2/user.slice/cgroup.controllers");
    assert_starts(&e, &format!("{} does not list cpu", file.display()));
    assert_v2_advice(&e);
    assert!(!s.path("v2/user.slice/fleet").exists());
}

#[test]
fn v2_refuses_a_parent_whose_procs_it_cannot_write() {
    let s = Scratch::new("v2_procs");
    let (mountinfo, own) = v2_tree(&s);
    let procs = s.path("v2/user.slice/cgroup.procs");
    std::fs::remove_file(&procs).unwrap();
    std::fs::create_dir(&procs).unwrap(); // opens for reading only, as root too
    let e = refusal(&mountinfo, own);
    assert_starts(&e, &format!("{} is not writable", procs.display()));
    assert_v2_advice(&e);
}

#[test]
fn v2_refuses_a_parent_it_cannot_make_a_group_in() {
    let s = Scratch::new("v2_mkdir");
    let (mountinfo, own) = v2_tree(&s);
    let taken = s.put("v2/user.slice/fleet", "not a directory");
    let e = refusal(&mountinfo, own);
    assert_starts(&e, &format!("cannot create {}", taken.display()));
    assert_v2_advice(&e);
}

#[test]
fn v2_refuses_when_cpu_cannot_be_enabled_and_leaves_no_group() {
    let s = Scratch::new("v2_subtree_control");
    let (mountinfo, own) = v2_tree(&s);
    let control = s.path("v2/user.slice/cgroup.subtree_control");
    std::fs::remove_file(&control).unwrap();
    std::fs::create_dir(&control).unwrap();
    let e = refusal(&mountinfo, own);
    assert_starts(&e, &format!("writing +cpu to {} failed", control.display()));
    assert_v2_advice(&e);
    assert!(
        !s.path("v2/user.slice/fleet").exists(),
        "the fleet's group is left"
    );
}

#[test]
fn a_busy_subtree_control_is_explained_by_the_no_internal_processes_rule() {
    let file = Path::new("/sys/fs/cgroup/a/cgroup.subtree_control");
    let e = subtree_refusal(file, &io::Error::from(ErrorKind::ResourceBusy));
    assert!(
        e.ends_with(
            ": /sys/fs/cgroup/a holds processes of its own, and cgroup v2 enables no \
             controller for the children of a group that does"
        ),
        "{e}"
    );
}

#[test]
fn v1_refuses_a_kernel_without_cfs_bandwidth() {
    let s = Scratch::new("v1_no_cfs");
    let (mountinfo, own) = hybrid_tree(&s);
    let quota = s.path("fs/cpu,cpuacct/cpu.cfs_quota_us");
    std::fs::remove_file(&quota).unwrap();
    let e = refusal(&mountinfo, own);
    assert_starts(
        &e,
        &format!(
            "{} does not exist: this kernel has no CFS bandwidth control",
            quota.display()
        ),
    );
    assert_v1_advice(&e);
}

#[test]
fn v1_refuses_a_mount_it_cannot_make_a_group_in() {
    let s = Scratch::new("v1_mkdir");
    let (mountinfo, own) = hybrid_tree(&s);
    let taken = s.put("fs/cpu,cpuacct/fleet", "not a directory");
    let e = refusal(&mountinfo, own);
    assert_starts(&e, &format!("cannot create {}", taken.display()));
    assert_v1_advice(&e);
}

/// What making the fleet's group under `mountinfo` as process `own` fails with.
fn refusal(mountinfo: &str, own: &str) -> String {
    Cgroups::find(mountinfo, own, None)
        .unwrap()
        .fleet("fleet")
        .unwrap_err()
}

fn assert_starts(e: &str, start: &str) {
    assert!(e.starts_with(start), "{e}");
}

fn assert_v2_advice(e: &str) {
    for how in [
        "cgroup v2's cpu.max",
        "the parent of this process's group /user.slice/me.scope",
        "run it as root",
        "systemd-run --user --scope -p Delegate=yes",
        "LIVECOUNT_TESTBED_CGROUP=/sys/fs/cgroup/<path>",
    ] {
        assert!(e.contains(how), "no {how:?} in: {e}");
    }
}

fn assert_v1_advice(e: &str) {
    for how in [
        "cgroup v1's cpu controller",
        "the cpu controller's mount point",
        "run it as root",
        "LIVECOUNT_TESTBED_CGROUP=<dir>",
    ] {
        assert!(e.contains(how), "no {how:?} in: {e}");
    }
}
