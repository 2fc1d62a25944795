// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * fsprof's syscall level: every file-system system call, timed in the kernel from the raw
 * syscall tracepoints (sys_enter → sys_exit), counted in log2 buckets of the profile's clock,
 * per operation, per caller and per file, with one event to user space only for calls over a
 * threshold. The loader is syscall-trace/src/program.rs (aya); docs/design.md says why it is
 * built this way, docs/format.md what it writes.
 *
 * Scope (rodata `mode`):
 *   MODE_MOUNT: calls of any process whose file is on the mount's superblock (the device in
 *     `ctl[CTL_MNT_DEV]`, set once the mount exists; 0 matches nothing), or
 *     whose path resolves into the mount: absolute paths under `mnt_path`, relative ones from
 *     a working directory or dirfd on the mount. The daemon (`self_tgid`) is never counted,
 *     nor are the control files (inode numbers at or above `ctl_ino_min` on the mount, or
 *     their names at the mount's root).
 *   MODE_PROCS: every call of the processes in `procs` (a command and its descendants, added
 *     at fork in the kernel), whatever it reaches.
 *
 * Miss path: the syscall number is checked first (one rodata load), then the process filter,
 * and only then is anything else read.
 *
 * Cost: on this kind of machine a helper call costs about 30 ns (every return goes through
 * the CPU's return-thunk mitigation), so a timed call makes as few as it can: the task's
 * storage answers whether it is followed (process scope) and what the exit needs (its
 * sys_tab entry, so the exit never looks at the task's registers); pid, tgid and comm are
 * loaded from the task directly; a file's inode number and superblock come in one read, and
 * the task's last file is remembered (file_id); a stat's result is read only when a
 * hot file or the mount's control files need it; a hot file is named by the absolute path
 * the call gave before its dentries are walked; a full hot-file table is not tried again.
 *
 * Counting: a call is counted when it ends (count, total and bucket together), so bucket sums
 * always equal counts. A call started before a reset (generation `ctl[CTL_GEN]`) records
 * nothing. Nothing is dropped without a count in `stats`.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_SYSCALLS 512
#define MAX_BUCKETS 512
#define PATH_BUF 256
#define NAME_MAX_PART 64
#define MNT_MAX 256
#define CTL_NAMES 4
#define CTL_NAME_MAX 32
#define DENTRY_DEPTH 24
#define AT_FDCWD -100

enum mode { MODE_MOUNT = 1, MODE_PROCS = 2 };

/* How a call names its file (sys_tab bits 8..11). */
enum kind {
	K_FD = 1,	/* fd in arg0 */
	K_FD_FD2 = 2,	/* fds in arg0 and arg2 (copy_file_range, splice) */
	K_FD_FD1 = 3,	/* fds in arg0 and arg1 (sendfile) */
	K_PATH = 4,	/* path in arg0 */
	K_PATH_PATH1 = 5, /* paths in arg0 and arg1 (rename, link) */
	K_PATH1 = 6,	/* path in arg1 (symlink's new name) */
	K_AT = 7,	/* dirfd arg0, path arg1 */
	K_AT_AT23 = 8,	/* dirfd arg0 + path arg1, dirfd arg2 + path arg3 (renameat, linkat) */
	K_AT12 = 9,	/* dirfd arg1, path arg2 (symlinkat) */
};

/* sys_tab bits. */
#define T_OP(v) ((v) & 0xff)		/* operation + 1; 0: not traced */
#define T_KIND(v) (((v) >> 8) & 0xf)
#define T_BUF_ARG(v) (((v) >> 12) & 0x7) /* argument holding the stat buffer */
#define T_RET_FD (1u << 16)		/* returns a new descriptor */
#define T_STAT (1u << 17)		/* fills a struct stat */
#define T_STATX (1u << 18)		/* fills a struct statx */
#define T_SIZE2 (1u << 19)		/* arg2 is a byte count */
#define T_OFF3 (1u << 20)		/* arg3 is a file offset */
#define T_CLOSE (1u << 21)		/* the descriptor is gone at exit */

/* ctl slots, written by user space. */
enum {
	CTL_GEN = 0,
	CTL_SLOW = 1,
	CTL_LAUNCHER = 2,
	CTL_MNT_DEV = 3,
	CTL_FOLLOW_GEN = 4,	/* raised when user space follows a running process */
	CTL_HOT_FULL = 5,	/* set by the program when the hot-file table is full; a reset clears it */
	CTL_SLOTS = 8,
};

/* Whether a task is followed, as its storage remembers it (process scope). */
enum { FOLLOW_UNKNOWN = 0, FOLLOW_NO = 1, FOLLOW_YES = 2 };

/* stats slots: everything not counted is counted here. */
enum {
	ST_EVENTS_LOST = 0,	/* slow events the ring had no room for */
	ST_STORAGE = 1,		/* calls not timed: no task storage */
	ST_KEYED_FULL = 2,	/* calls counted in the per-caller `other` entry: table full */
	ST_HOT_FULL = 3,	/* calls in no hot-file entry: table full */
	ST_PATH_UNREAD = 4,	/* calls whose path could not be read (mount scope: not decided) */
	ST_PROCS_FULL = 5,	/* descendants not followed: process table full */
	ST_UNENDED = 6,		/* calls whose exit never came (another call started first) */
	ST_EVENTS = 7,		/* slow events sent */
	ST_SLOTS = 16,
};

/* Per-caller key kinds (rodata `by_kind`). */
enum { BY_NONE = 0, BY_PID = 1, BY_UID = 2, BY_COMM = 3, BY_OTHER = 0xff };

/* Name kinds of a path in an event or hot entry. */
enum { NAME_NONE = 0, NAME_ARG = 1, NAME_DENTRIES = 2, NAME_DENTRIES_CUT = 3 };

/* ---- set at load (aya overrides these globals before the object is loaded) ---- */
volatile const __u32 mode = 0;
volatile const __u32 self_tgid = 0;
volatile const __u32 mnt_len = 0;
volatile const char mnt_path[MNT_MAX] = {};
volatile const __u64 ctl_ino_min = 0;		/* 0: no control files */
volatile const __u32 ctl_nlen[CTL_NAMES] = {};
volatile const char ctl_names[CTL_NAMES][CTL_NAME_MAX] = {};
volatile const __u32 res_shift = 0;		/* log2 of the resolution */
volatile const __u64 bounds[MAX_BUCKETS] = {};	/* lowest latency of each bucket */
volatile const __u64 cyc_q = 1;			/* cycles per ns: cyc_q + cyc_r / 2^32 */
volatile const __u64 cyc_r = 0;
volatile const __u32 sys_tab[MAX_SYSCALLS] = {};
volatile const __u32 by_kind = BY_NONE;
volatile const __u32 hot_on = 0;
volatile const __u32 slowest_n = 0;		/* keep events for the N slowest calls; 0: off */

struct inflight {
	__u64 start;
	__u64 a[4];		/* arguments kept for the exit: buffers, sizes, offsets, path */
	__u64 buf;		/* the stat buffer (T_STAT, T_STATX: statx's is the fifth argument) */
	__u64 ino;
	__u32 dev;
	__u32 gen;
	__s32 fd;
	__u16 op;		/* operation + 1; 0: nothing in flight */
	__u8 tab_kind;
	__u8 path_arg;		/* 1 + the argument holding the path kept for the slow log */
	__u8 undecided;		/* mount scope: a path could not be read at the entry */
	__u8 follow;		/* process scope: FOLLOW_*, valid while follow_gen is current */
	__u8 pad[2];
	__u32 follow_gen;
	__u32 tab;		/* the call's sys_tab entry */
	__u32 pad2;
	__u64 file;		/* process scope with hot files: the descriptor's file at the entry */
	__u64 cfile;		/* file_id's cache: the task's last file, its inode, their ids */
	__u64 cinode;
	__u64 cino;
	__u32 cdev;
	__u32 pad3;
};

struct hot_key {
	__u32 dev;
	__u32 pad;
	__u64 ino;
};

struct hot_val {
	__u64 count;
	__u64 total;
	__u32 name_kind;
	__u32 name_len;
	char name[PATH_BUF + NAME_MAX_PART];
};

struct keyed_key {
	__u16 op;
	__u8 kind;
	__u8 pad;
	__u32 id;
	char comm[16];
};

struct keyed_val {
	__u64 count;
	__u64 total;
	__u64 b[MAX_BUCKETS];
};

struct event {
	__u64 end_ns;
	__u64 cycles;
	__s64 ret;
	__u64 ino;
	__u64 off;
	__u64 size;
	__u32 tid;
	__u32 tgid;
	__u32 uid;
	__u32 dev;
	__u16 op;
	__u8 why;		/* 1: over the slow threshold; 2: among the slowest; 3: both */
	__u8 name_kind;
	__u32 name_len;
	__u32 flags;		/* 1: offset, 2: size */
	__u32 pad;
	char comm[16];
	char name[PATH_BUF + NAME_MAX_PART];
};

struct slowest_state {
	__u32 len;		/* latencies in this CPU's heap (up to slowest_n) */
	__u32 pad;
};

struct scratch {
	char path[PATH_BUF + NAME_MAX_PART];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} inflight SEC(".maps");

struct hist_val {
	__u64 count;
	__u64 total;
	__u64 b[MAX_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* one per operation, set at load */
	__type(key, __u32);
	__type(value, struct hist_val);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* set at load */
	__type(key, struct keyed_key);
	__type(value, struct keyed_val);
} keyed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* set at load */
	__type(key, struct hot_key);
	__type(value, struct hot_val);
} hot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CTL_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slowest_state);
} slowest SEC(".maps");

/* Each CPU's min-heap of the latencies of its slowest_n slowest calls: entries
 * [cpu × slowest_n, (cpu + 1) × slowest_n) (sized at load: possible CPUs × slowest_n). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} slowest_heap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* A zeroed value to create per-caller entries from (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct keyed_val);
} keyed_zero SEC(".maps");

/* A zeroed value to create hot-file entries from. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hot_val);
} hot_zero SEC(".maps");

static __always_inline void stat_add(__u32 slot, __u64 n)
{
	__u64 *p = bpf_map_lookup_elem(&stats, &slot);
	if (p)
		*p += n;
}

static __always_inline __u64 ctl_get(__u32 slot)
{
	__u64 *p = bpf_map_lookup_elem(&ctl, &slot);
	return p ? *p : 0;
}

/* ---- clock and buckets: the same math as profile-store/src/bucket.rs ---- */

/* ns → cycles of the profile's clock: ns × cycles_per_sec / 10^9 in 64-bit pieces. */
static __always_inline __u64 to_cycles(__u64 ns)
{
	__u64 hi = ns >> 32, lo = ns & 0xffffffffULL;
	return ns * cyc_q + hi * cyc_r + ((lo * cyc_r) >> 32);
}

static __always_inline __u32 ilog2(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* floor(r · log2 c), 0 for c = 0: the octave's first bucket, then the bounds within it. */
static __always_inline __u32 bucket_of(__u64 c)
{
	__u32 octave = ilog2(c | 1);
	__u32 base = octave << res_shift;
	__u32 r = 1u << res_shift;
	__u32 b = base;
	for (__u32 i = 1; i < 8; i++) {
		if (i >= r)
			break;
		if (c >= bounds[(base + i) & (MAX_BUCKETS - 1)])
			b++;
	}
	return b;
}

/* This CPU's histogram of `op`: no other writer while the program runs (it runs with
 * preemption off, and no syscall happens in an NMI). */
static __always_inline void hist_add(__u32 op, __u64 cycles, __u32 b)
{
	struct hist_val *h = bpf_map_lookup_elem(&hist, &op);
	if (!h)
		return;
	h->count += 1;
	h->total += cycles;
	h->b[b & (MAX_BUCKETS - 1)] += 1;
}

/* ---- descriptors, paths and names ---- */

/* Descriptor `fd`'s file, read from the descriptor table with bpf_probe_read_kernel: the
 * verifier allows no variable index into a kernel struct, so the pointer is a plain number
 * to it, whose fields each take a helper call (BPF_CORE_READ). */
static __always_inline struct file *fd_file(struct task_struct *t, long fd)
{
	if (fd < 0)
		return 0;
	struct files_struct *files = t->files;
	if (!files)
		return 0;
	struct fdtable *fdt = files->fdt;
	if (!fdt)
		return 0;
	unsigned int max = fdt->max_fds;
	if ((unsigned long)fd >= max)
		return 0;
	struct file **arr = fdt->fd;
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]))
		return 0;
	return f;
}

/* Two words of a kernel struct at `base`, at offsets `a` < `b` (CO-RE relocations: constants
 * by the time the verifier sees them) at most 56 bytes apart, in one read instead of two
 * (i_sb and i_ino lie 24 bytes apart on x86-64, d_parent and d_name.name 16). False when they
 * lie farther apart on this kernel or the read fails: read them one by one then. */
static __always_inline bool two_words(const void *base, __u32 a, __u32 b, __u64 *va, __u64 *vb)
{
	if (b <= a || b - a > 56)
		return false;
	__u64 w[8] = {};
	if (bpf_probe_read_kernel(w, b - a + 8, (const char *)base + a))
		return false;
	*va = w[0];
	*vb = w[((b - a) / 8) & 7];
	return true;
}

/* The file's device and inode number; 0 for none. With `cache` (the task's storage), the
 * task's last file is remembered: a descriptor call after the open that made it (a read, a
 * write, its close) finds the same file and inode pointers and takes the device and number
 * from the storage, two reads fewer. Both pointers must match: a file freed and another made
 * at the same address (file structs are reused at once) has another inode unless that inode
 * too was freed and remade there between two calls of this task. */
static __always_inline __u32 file_id(struct file *f, __u64 *ino, struct inflight *cache)
{
	if (!f)
		return 0;
	struct inode *i = BPF_CORE_READ(f, f_inode);
	if (!i)
		return 0;
	if (cache && (__u64)f == cache->cfile && (__u64)i == cache->cinode) {
		*ino = cache->cino;
		return cache->cdev;
	}
	__u64 sb = 0;
	if (!two_words(i, bpf_core_field_offset(struct inode, i_sb),
		       bpf_core_field_offset(struct inode, i_ino), &sb, ino)) {
		sb = (__u64)BPF_CORE_READ(i, i_sb);
		*ino = BPF_CORE_READ(i, i_ino);
	}
	__u32 dev = sb ? BPF_CORE_READ((struct super_block *)sb, s_dev) : 0;
	if (cache) {
		cache->cfile = (__u64)f;
		cache->cinode = (__u64)i;
		cache->cino = *ino;
		cache->cdev = dev;
	}
	return dev;
}

/* Descriptor `fd`'s file's device and inode number (0 for none). */
static __always_inline __u32 fd_id(struct task_struct *t, long fd, __u64 *ino)
{
	return file_id(fd_file(t, fd), ino, 0);
}

/* Where a relative path starts (the working directory, or dirfd's file): its device, and
 * whether it is its file system's root. */
static __always_inline __u32 base_dev(struct task_struct *t, long dirfd, bool *root)
{
	*root = false;
	struct dentry *d = 0;
	if ((int)dirfd == AT_FDCWD) {
		struct fs_struct *fs = t->fs;
		d = fs ? fs->pwd.dentry : 0;
	} else {
		struct file *f = fd_file(t, dirfd);
		struct dentry *dr = f ? BPF_CORE_READ(f, f_path.dentry) : 0;
		if (!dr)
			return 0;
		*root = BPF_CORE_READ(dr, d_parent) == dr;
		return BPF_CORE_READ(dr, d_sb, s_dev);
	}
	if (!d)
		return 0;
	*root = d->d_parent == d;
	struct super_block *sb = d->d_sb;
	return sb ? sb->s_dev : 0;
}

/* Whether `p + from` is exactly one of the control files' names. */
static __always_inline bool control_name(const char *p, __u32 from)
{
#pragma unroll
	for (int n = 0; n < CTL_NAMES; n++) {
		__u32 len = ctl_nlen[n];
		if (len == 0 || len >= CTL_NAME_MAX)
			continue;
		bool same = true;
		for (__u32 i = 0; i < CTL_NAME_MAX; i++) {
			if (i > len)
				break;
			char want = i < len ? ctl_names[n][i] : 0;
			if (p[(from + i) & (PATH_BUF - 1)] != want) {
				same = false;
				break;
			}
		}
		if (same)
			return true;
	}
	return false;
}

enum { NO = 0, YES = 1, CONTROL = 2, UNREAD = 3 };

/* Whether a path argument resolves into the mount (mount scope). */
static __always_inline int path_on_mount(struct task_struct *t, __u32 mnt_dev, long dirfd,
					 __u64 upath, bool at)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return NO;
	long n = upath ? bpf_probe_read_user_str(s->path, PATH_BUF, (const void *)upath) : 1;
	if (n < 0)
		return UNREAD;
	if (n <= 1) {
		/* An empty path (AT_EMPTY_PATH, utimensat's NULL): the call is about dirfd's file. */
		if (!at)
			return NO;
		__u64 ino = 0;
		__u32 dev = fd_id(t, dirfd, &ino);
		if (dev != mnt_dev)
			return NO;
		return (ctl_ino_min && ino >= ctl_ino_min) ? CONTROL : YES;
	}
	if (s->path[0] == '/') {
		__u32 len = mnt_len;
		if (len == 0 || len >= PATH_BUF - 1)
			return NO;
		for (__u32 i = 0; i < MNT_MAX; i++) {
			if (i >= len)
				break;
			if (s->path[i & (PATH_BUF - 1)] != mnt_path[i & (MNT_MAX - 1)])
				return NO;
		}
		char next = s->path[len & (PATH_BUF - 1)];
		if (next != '/' && next != 0)
			return NO;
		if (next == '/' && control_name(s->path, len + 1))
			return CONTROL;
		return YES;
	}
	bool root = false;
	if (base_dev(t, at ? dirfd : AT_FDCWD, &root) != mnt_dev)
		return NO;
	if (root && control_name(s->path, 0))
		return CONTROL;
	return YES;
}

/* Whether descriptor `fd`'s file is on the mount; its device and inode in *dev, *ino. */
static __always_inline int fd_on_mount(struct task_struct *t, __u32 mnt_dev, long fd, __u32 *dev,
				       __u64 *ino)
{
	*dev = fd_id(t, fd, ino);
	if (*dev != mnt_dev)
		return NO;
	return (ctl_ino_min && *ino >= ctl_ino_min) ? CONTROL : YES;
}

/* Combines two answers of a two-file call: on the mount if either is. */
static __always_inline int either(int a, int b)
{
	if (a == CONTROL || b == CONTROL)
		return CONTROL;
	if (a == YES || b == YES)
		return YES;
	if (a == UNREAD || b == UNREAD)
		return UNREAD;
	return NO;
}

/* The names from `d` up to its file system's root, leaf first, each ending in NUL; *kind says
 * whether the root was reached (NAME_DENTRIES) or the walk stopped short (NAME_DENTRIES_CUT). */
static __always_inline __u32 dentry_names(struct dentry *d, char *buf, __u32 *kind)
{
	__u32 off = 0;
	*kind = NAME_DENTRIES_CUT;
	for (int i = 0; i < DENTRY_DEPTH; i++) {
		if (!d)
			return off;
		__u64 parent_w = 0, name_w = 0;
		if (!two_words(d, bpf_core_field_offset(struct dentry, d_parent),
			       bpf_core_field_offset(struct dentry, d_name.name), &parent_w, &name_w)) {
			parent_w = (__u64)BPF_CORE_READ(d, d_parent);
			name_w = (__u64)BPF_CORE_READ(d, d_name.name);
		}
		struct dentry *parent = (struct dentry *)parent_w;
		const unsigned char *name = (const unsigned char *)name_w;
		if (parent == d) {
			*kind = NAME_DENTRIES;
			return off;
		}
		if (off >= PATH_BUF)
			return off;
		long n = bpf_probe_read_kernel_str(buf + (off & (PATH_BUF - 1)), NAME_MAX_PART, name);
		if (n <= 0)
			return off;
		off += n;
		d = parent;
	}
	return off;
}

/* ---- the records ---- */

static __always_inline void keyed_add(__u16 op, __u64 cycles, __u32 b, struct task_struct *t)
{
	struct keyed_key k = {};
	k.op = op;
	k.kind = by_kind;
	if (by_kind == BY_PID) {
		k.id = t->pid;
	} else if (by_kind == BY_UID) {
		k.id = (__u32)bpf_get_current_uid_gid();
	} else {
		/* The task's comm, read in place (two loads, where bpf_get_current_comm is a call) */
		__u64 *c = (__u64 *)k.comm;
		c[0] = *(__u64 *)&t->comm[0];
		c[1] = *(__u64 *)&t->comm[8];
	}
	struct keyed_val *v = bpf_map_lookup_elem(&keyed, &k);
	if (!v) {
		__u32 zero = 0;
		struct keyed_val *z = bpf_map_lookup_elem(&keyed_zero, &zero);
		if (z && bpf_map_update_elem(&keyed, &k, z, BPF_NOEXIST) == 0) {
			v = bpf_map_lookup_elem(&keyed, &k);
		} else {
			v = bpf_map_lookup_elem(&keyed, &k);
		}
		if (!v) {
			/* The table is full: the `other` entry of this operation (made by user space). */
			struct keyed_key o = {};
			o.op = op;
			o.kind = BY_OTHER;
			v = bpf_map_lookup_elem(&keyed, &o);
			stat_add(ST_KEYED_FULL, 1);
			if (!v)
				return;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->total, cycles);
	__sync_fetch_and_add(&v->b[b & (MAX_BUCKETS - 1)], 1);
}

/* The file a call ended on, for its name: `f` when the exit found it already, else descriptor
 * `fd`'s, looked up only now (most calls are named by nothing). */
static __always_inline struct file *named_file(struct task_struct *t, struct file *f, long fd)
{
	return f ? f : fd_file(t, fd);
}

static __always_inline void hot_add(struct inflight *e, __u64 cycles, struct file *f, long fd,
				    struct task_struct *t)
{
	if (!e->dev)
		return;
	struct hot_key k = { .dev = e->dev, .ino = e->ino };
	struct hot_val *v = bpf_map_lookup_elem(&hot, &k);
	if (v && v->name_kind == NAME_ARG && v->name[0] != '/' && (f = named_file(t, f, fd))) {
		/* Named by a path as a call gave it (perhaps relative): by its dentries now. */
		struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
		__u32 kind = 0;
		v->name_len = dentry_names(d, v->name, &kind);
		v->name_kind = kind;
	}
	if (!v) {
		__u32 full_slot = CTL_HOT_FULL;
		__u64 *full = bpf_map_lookup_elem(&ctl, &full_slot);
		if (!full)
			return;
		if (*full) {
			/* Once the table is full, a file not in it costs one lookup. */
			stat_add(ST_HOT_FULL, 1);
			return;
		}
		__u32 zero = 0;
		struct hot_val *z = bpf_map_lookup_elem(&hot_zero, &zero);
		if (!z)
			return;
		if (bpf_map_update_elem(&hot, &k, z, BPF_NOEXIST) != 0) {
			v = bpf_map_lookup_elem(&hot, &k);
			if (!v) {
				*full = 1;
				stat_add(ST_HOT_FULL, 1);
				return;
			}
		} else {
			v = bpf_map_lookup_elem(&hot, &k);
			if (!v)
				return;
			/* Named once, when first seen: by the path the call gave when it is absolute (one
			 * read), else from the file's dentries, else by the relative path given (named
			 * from its dentries at the file's next call that has it). */
			long n = 0;
			if (e->path_arg) {
				__u32 i = (e->path_arg - 1) & 3;
				n = bpf_probe_read_user_str(v->name, PATH_BUF, (const void *)e->a[i]);
				if (n > 0 && v->name[0] == '/') {
					v->name_len = n;
					v->name_kind = NAME_ARG;
					goto count;
				}
			}
			f = named_file(t, f, fd);
			if (f) {
				struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
				__u32 kind = 0;
				v->name_len = dentry_names(d, v->name, &kind);
				v->name_kind = kind;
			} else if (n > 0) {
				v->name_len = n;
				v->name_kind = NAME_ARG;
			}
		}
	}
count:
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->total, cycles);
}

static __always_inline __u64 *heap_at(__u32 base, __u32 i)
{
	__u32 k = base + i;
	return bpf_map_lookup_elem(&slowest_heap, &k);
}

#define HEAP_DEPTH 14 /* levels of a heap of slowest_n <= 10,000 */

/* Whether a call of `cycles` is among this CPU's slowest_n slowest so far, in which case it
 * takes the place of the fastest of them in the CPU's heap and is sent: the events of each CPU
 * hold its slowest_n slowest calls, so those of every CPU hold the slowest_n slowest of all.
 * A call costs one comparison with the heap's root unless it is that slow. */
static __always_inline bool slowest_take(__u64 cycles)
{
	if (!slowest_n)
		return false;
	__u32 zero = 0;
	struct slowest_state *s = bpf_map_lookup_elem(&slowest, &zero);
	if (!s)
		return false;
	__u32 base = bpf_get_smp_processor_id() * slowest_n;
	__u32 n = slowest_n;
	if (s->len < n) {
		/* Filling: add at the end, then up. */
		__u32 i = s->len;
		s->len = i + 1;
		__u64 *slot = heap_at(base, i);
		if (!slot)
			return false;
		*slot = cycles;
		for (int d = 0; d < HEAP_DEPTH; d++) {
			if (i == 0)
				break;
			__u32 parent = (i - 1) / 2;
			__u64 *p = heap_at(base, parent);
			__u64 *c = heap_at(base, i);
			if (!p || !c || *p <= *c)
				break;
			__u64 t = *p;
			*p = *c;
			*c = t;
			i = parent;
		}
		return true;
	}
	__u64 *root = heap_at(base, 0);
	if (!root || cycles <= *root)
		return false;
	*root = cycles;
	__u32 i = 0;
	for (int d = 0; d < HEAP_DEPTH; d++) {
		__u32 l = 2 * i + 1, r = 2 * i + 2, m = i;
		__u64 *pi = heap_at(base, i);
		if (!pi)
			break;
		__u64 vm = *pi;
		if (l < n) {
			__u64 *pl = heap_at(base, l);
			if (pl && *pl < vm) {
				m = l;
				vm = *pl;
			}
		}
		if (r < n) {
			__u64 *pr = heap_at(base, r);
			if (pr && *pr < vm) {
				m = r;
				vm = *pr;
			}
		}
		if (m == i)
			break;
		__u64 *pm = heap_at(base, m);
		if (!pm)
			break;
		*pm = *pi;
		*pi = vm;
		i = m;
	}
	return true;
}

static __always_inline void send_event(struct inflight *e, __u32 op, __u32 tab, __u64 end,
				       __u64 cycles, long ret, __u8 why,
				       struct file *f, long fd, struct task_struct *t)
{
	struct event *ev = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	if (!ev) {
		stat_add(ST_EVENTS_LOST, 1);
		return;
	}
	ev->end_ns = end;
	ev->cycles = cycles;
	ev->ret = ret;
	ev->ino = e->ino;
	ev->dev = e->dev;
	ev->tid = t->pid;
	ev->tgid = t->tgid;
	ev->uid = (__u32)bpf_get_current_uid_gid();
	ev->op = op;
	ev->why = why;
	ev->flags = 0;
	ev->off = 0;
	ev->size = 0;
	if (tab & T_SIZE2) {
		ev->size = e->a[2];
		ev->flags |= 2;
	}
	if (tab & T_OFF3) {
		ev->off = e->a[3];
		ev->flags |= 1;
	}
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	ev->name_kind = NAME_NONE;
	ev->name_len = 0;
	if (e->path_arg) {
		__u32 i = (e->path_arg - 1) & 3;
		long n = bpf_probe_read_user_str(ev->name, PATH_BUF, (const void *)e->a[i]);
		if (n > 0) {
			ev->name_len = n;
			ev->name_kind = NAME_ARG;
		}
	} else if ((f = named_file(t, f, fd))) {
		struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
		__u32 kind = 0;
		ev->name_len = dentry_names(d, ev->name, &kind);
		ev->name_kind = kind;
	}
	bpf_ringbuf_submit(ev, 0);
	stat_add(ST_EVENTS, 1);
}

/* Whether a call of `kind` with arguments a0..a3 is about the mount; the device and inode of
 * its (first) descriptor's file in *dev, *ino. */
static __always_inline int decide(struct task_struct *t, __u32 mnt_dev, __u32 kind, __u64 a0,
				  __u64 a1, __u64 a2, __u64 a3, __u32 *dev, __u64 *ino)
{
	int on = NO;
	__u32 d2 = 0;
	__u64 i2 = 0;
	switch (kind) {
	case K_FD:
		on = fd_on_mount(t, mnt_dev, a0, dev, ino);
		break;
	case K_FD_FD2:
		on = either(fd_on_mount(t, mnt_dev, a0, dev, ino), fd_on_mount(t, mnt_dev, a2, &d2, &i2));
		break;
	case K_FD_FD1:
		on = either(fd_on_mount(t, mnt_dev, a0, dev, ino), fd_on_mount(t, mnt_dev, a1, &d2, &i2));
		break;
	case K_PATH:
		on = path_on_mount(t, mnt_dev, AT_FDCWD, a0, false);
		break;
	case K_PATH_PATH1:
		on = either(path_on_mount(t, mnt_dev, AT_FDCWD, a0, false),
		    path_on_mount(t, mnt_dev, AT_FDCWD, a1, false));
		break;
	case K_PATH1:
		on = path_on_mount(t, mnt_dev, AT_FDCWD, a1, false);
		break;
	case K_AT:
		on = path_on_mount(t, mnt_dev, a0, a1, true);
		break;
	case K_AT_AT23:
		on = either(path_on_mount(t, mnt_dev, a0, a1, true), path_on_mount(t, mnt_dev, a2, a3, true));
		break;
	case K_AT12:
		on = path_on_mount(t, mnt_dev, a1, a2, true);
		break;
	default:
		on = NO;
	}
	return on;
}

/* ---- the programs ---- */

static __always_inline bool followed(__u32 tgid)
{
	__u32 *state = bpf_map_lookup_elem(&procs, &tgid);
	return state && *state == 2;
}

/* Process scope: the task's storage if the task is followed, else 0. Whether it is, is looked
 * up in `procs` once per task and remembered in its storage (made for every task that makes a
 * traced call, followed or not), until user space follows another running process (a new
 * CTL_FOLLOW_GEN) or the task execs (the exec program forgets it): a call then costs one
 * storage lookup, followed or not, where a hash lookup came before it. */
static __always_inline struct inflight *followed_task(struct task_struct *t)
{
	__u32 fgen = ctl_get(CTL_FOLLOW_GEN);
	struct inflight *e = bpf_task_storage_get(&inflight, t, 0, 0);
	if (e && e->follow != FOLLOW_UNKNOWN && e->follow_gen == fgen)
		return e->follow == FOLLOW_YES ? e : 0;
	bool yes = followed(t->tgid);
	if (!e)
		e = bpf_task_storage_get(&inflight, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!e) {
		if (yes)
			stat_add(ST_STORAGE, 1);
		return 0;
	}
	e->follow = yes ? FOLLOW_YES : FOLLOW_NO;
	e->follow_gen = fgen;
	return yes ? e : 0;
}

SEC("raw_tracepoint/sys_enter")
int fsprof_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long id = ctx->args[1];
	if (id < 0 || id >= MAX_SYSCALLS)
		return 0;
	__u32 tab = sys_tab[id];
	if (!T_OP(tab))
		return 0;
	struct task_struct *t = bpf_get_current_task_btf();
	struct inflight *e = 0;
	__u32 mnt_dev = 0;
	if (mode == MODE_PROCS) {
		e = followed_task(t);
		if (!e)
			return 0;
	} else {
		if ((__u32)t->tgid == self_tgid)
			return 0;
		mnt_dev = ctl_get(CTL_MNT_DEV);
	}
	/* The task's saved registers, loaded directly (a BTF pointer): di, si, dx and r10 are the
	 * first four arguments. */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	__u64 a0 = regs->di, a1 = regs->si, a2 = regs->dx, a3 = regs->r10, a4 = regs->r8;
	__u32 kind = T_KIND(tab);
	__u32 dev = 0;
	__u64 ino = 0;
	__u64 file = 0;
	long fd = -1;
	__u8 path_arg = 0;
	int on = YES;
	switch (kind) {
	case K_FD:
		fd = a0;
		break;
	case K_FD_FD2:
	case K_FD_FD1:
		fd = a0;
		break;
	case K_PATH:
	case K_PATH_PATH1:
		path_arg = 1;
		break;
	case K_PATH1:
		path_arg = 2;
		break;
	case K_AT:
	case K_AT_AT23:
		path_arg = 2;
		break;
	case K_AT12:
		path_arg = 3;
		break;
	}
	if (mode == MODE_MOUNT) {
		/* Until the mount's device is known (the mount is being made), decided when the
		 * call ends. */
		on = mnt_dev ? decide(t, mnt_dev, kind, a0, a1, a2, a3, &dev, &ino) : UNREAD;
		/* A path not in memory yet (a page the call itself will fault in): decided when
		 * the call ends, by then it is. */
		if (on != YES && on != UNREAD)
			return 0;
		if (dev != mnt_dev) {
			/* A two-file call whose second file is the mount's. */
			dev = 0;
			ino = 0;
		}
	} else if (hot_on && fd >= 0) {
		struct file *f = fd_file(t, fd);
		file = (__u64)f;
		dev = file_id(f, &ino, e);
	}
	if (!e)
		e = bpf_task_storage_get(&inflight, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!e) {
		stat_add(ST_STORAGE, 1);
		return 0;
	}
	if (e->op)
		stat_add(ST_UNENDED, 1);
	e->op = T_OP(tab);
	e->tab = tab;
	e->gen = ctl_get(CTL_GEN);
	e->dev = dev;
	e->ino = ino;
	e->fd = fd;
	e->file = file;
	e->path_arg = path_arg;
	e->tab_kind = kind;
	e->undecided = on == UNREAD;
	e->a[0] = a0;
	e->a[1] = a1;
	e->a[2] = a2;
	e->a[3] = a3;
	__u64 buf = 0;
	switch (T_BUF_ARG(tab)) {
	case 1:
		buf = a1;
		break;
	case 2:
		buf = a2;
		break;
	case 3:
		buf = a3;
		break;
	case 4:
		buf = a4;
		break;
	}
	e->buf = buf;
	e->start = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int fsprof_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if (mode == MODE_MOUNT && (__u32)t->tgid == self_tgid)
		return 0; /* the daemon: the most frequent caller in mount scope, never counted */
	/* A task's calls do not nest: a call in flight is the one ending (its number need not be
	 * looked at, which would take a call to find the task's registers). */
	struct inflight *e = bpf_task_storage_get(&inflight, t, 0, 0);
	if (!e || !e->op)
		return 0;
	__u64 end = bpf_ktime_get_ns();
	__u32 tab = e->tab;
	__u16 op1 = e->op;
	e->op = 0;
	if (e->gen != (__u32)ctl_get(CTL_GEN))
		return 0;
	__u32 mnt_dev = mode == MODE_MOUNT ? ctl_get(CTL_MNT_DEV) : 0;
	if (e->undecided) {
		if (!mnt_dev)
			return 0; /* ended before the mount existed */
		__u32 dev = 0;
		__u64 ino = 0;
		int on = decide(t, mnt_dev, e->tab_kind, e->a[0], e->a[1], e->a[2], e->a[3], &dev,
				&ino);
		if (on == UNREAD)
			stat_add(ST_PATH_UNREAD, 1);
		if (on != YES)
			return 0;
		e->dev = dev == mnt_dev ? dev : 0;
		e->ino = dev == mnt_dev ? ino : 0;
	}
	long ret = ctx->args[1];
	__u64 ns = end > e->start ? end - e->start : 0;
	__u64 cycles = to_cycles(ns);
	/* What the call reached, where only its result says: the new descriptor's file, or the
	 * file a stat describes. A descriptor call's file is looked up again only to be named. */
	struct file *f = 0;
	long fd = -1;
	bool keys = hot_on || mode == MODE_MOUNT; /* the call's file is wanted: hot files, control files */
	if (ret >= 0 && (tab & T_RET_FD)) {
		fd = ret;
		if (keys) {
			__u64 ino = 0;
			__u32 dev = file_id(fd_file(t, ret), &ino, e);
			if (dev) {
				e->dev = dev;
				e->ino = ino;
			}
		}
	} else if (ret == 0 && (tab & (T_STAT | T_STATX)) && keys) {
		/* The file a stat describes. */
		__u64 buf = e->buf;
		__u64 ino = 0;
		__u32 dev = 0;
		if (tab & T_STAT) {
			__u64 sd[2] = {};
			if (!bpf_probe_read_user(sd, sizeof(sd), (const void *)buf)) {
				/* st_dev in the user encoding (new_encode_dev) */
				__u32 major = (sd[0] >> 8) & 0xfff;
				__u32 minor = (sd[0] & 0xff) | ((sd[0] >> 12) & 0xfff00);
				dev = (major << 20) | minor;
				ino = sd[1];
			}
		} else {
			/* struct statx from stx_ino (offset 32) to stx_dev_minor (140), in one read */
			__u64 sx[14] = {};
			if (!bpf_probe_read_user(sx, sizeof(sx), (const void *)(buf + 32))) {
				__u32 major = (__u32)sx[13];
				__u32 minor = (__u32)(sx[13] >> 32);
				dev = (major << 20) | minor;
				ino = sx[0];
			}
		}
		if (dev) {
			e->dev = dev;
			e->ino = ino;
		}
	} else if (e->file) {
		/* The file the entry found (a close's too: the last reference is dropped after
		 * this, on the way back to user space), to name it. */
		f = (struct file *)e->file;
	} else if (!(tab & T_CLOSE)) {
		fd = e->fd;
	}
	if (mode == MODE_MOUNT && ctl_ino_min && e->dev == mnt_dev && e->ino >= ctl_ino_min)
		return 0; /* a control file, reached by a path the entry did not recognise */
	if (mode == MODE_MOUNT && e->dev != mnt_dev) {
		/* Only the mount's files are keyed in mount scope. */
		e->dev = 0;
		e->ino = 0;
	}
	__u32 op = op1 - 1;
	__u32 b = bucket_of(cycles);
	hist_add(op, cycles, b);
	if (by_kind != BY_NONE)
		keyed_add(op, cycles, b, t);
	if (hot_on)
		hot_add(e, cycles, f, fd, t);
	__u64 slow = ctl_get(CTL_SLOW);
	__u8 why = 0;
	if (slow && cycles >= slow)
		why |= 1;
	if (slowest_take(cycles))
		why |= 2;
	if (why)
		send_event(e, op, tab, end, cycles, ret, why, f, fd, t);
	return 0;
}

/* A command's descendants are followed from their fork; the command itself from its exec
 * (so what its launcher does between fork and exec is not counted). */
SEC("raw_tracepoint/sched_process_fork")
int fsprof_fork(struct bpf_raw_tracepoint_args *ctx)
{
	if (mode != MODE_PROCS)
		return 0;
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid)
		return 0; /* a thread */
	__u32 state = 0;
	__u32 launcher_slot = CTL_LAUNCHER;
	__u64 *launcher = bpf_map_lookup_elem(&ctl, &launcher_slot);
	if (launcher && *launcher && *launcher == ptgid) {
		state = 1;
		*launcher = 0;
	} else {
		__u32 *ps = bpf_map_lookup_elem(&procs, &ptgid);
		if (!ps)
			return 0;
		state = *ps;
	}
	if (bpf_map_update_elem(&procs, &ctgid, &state, BPF_ANY))
		stat_add(ST_PROCS_FULL, 1);
	return 0;
}

SEC("raw_tracepoint/sched_process_exec")
int fsprof_exec(struct bpf_raw_tracepoint_args *ctx)
{
	if (mode != MODE_PROCS)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 *state = bpf_map_lookup_elem(&procs, &tgid);
	if (state && *state == 1)
		*state = 2;
	/* Whether the task is followed may have changed: looked up again at its next call. */
	struct inflight *e = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
	if (e)
		e->follow = FOLLOW_UNKNOWN;
	return 0;
}

SEC("raw_tracepoint/sched_process_exit")
int fsprof_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (mode != MODE_PROCS)
		return 0;
	struct task_struct *t = bpf_get_current_task_btf();
	struct signal_struct *sig = t->signal;
	if (!sig)
		return 0;
	if (sig->live.counter != 0)
		return 0; /* other threads of the process live on */
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	bpf_map_delete_elem(&procs, &tgid);
	return 0;
}
