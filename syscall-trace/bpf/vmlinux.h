/* The kernel types syscalls.bpf.c reads, trimmed by hand from
 * `bpftool btf dump file /sys/kernel/btf/vmlinux format c` (Linux 6.18, x86_64) to the fields
 * the program uses. Every struct is marked preserve_access_index: clang records each field
 * access as a CO-RE relocation by name, and the loader (aya) resolves it against the running
 * kernel's BTF, so field offsets here need not match any kernel; only names and types must.
 * Why trimmed rather than generated whole: the full dump is 134,588 lines (4.6 MB) of one
 * kernel's types, would make every diff of this directory unreadable, and would pin types the
 * program never reads. The enum values below are the kernel's UAPI (include/uapi/linux/bpf.h),
 * stable by contract. */
#ifndef FSPROF_VMLINUX_H
#define FSPROF_VMLINUX_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};
enum { BPF_ANY = 0, BPF_NOEXIST = 1, BPF_EXIST = 2 };
enum { BPF_F_NO_PREALLOC = 1 };
enum { BPF_LOCAL_STORAGE_GET_F_CREATE = 1 };

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
};

typedef struct {
	int counter;
} atomic_t;

struct super_block {
	__u32 s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct qstr {
	union {
		struct {
			__u32 hash;
			__u32 len;
		};
		__u64 hash_len;
	};
	const unsigned char *name;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct super_block *d_sb;
};

struct vfsmount;

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct fs_struct {
	struct path root;
	struct path pwd;
};

struct signal_struct {
	atomic_t live;
};

struct task_struct {
	int pid;
	int tgid;
	char comm[16];
	struct files_struct *files;
	struct fs_struct *fs;
	struct signal_struct *signal;
};

#pragma clang attribute pop

#endif
