// SPDX-License-Identifier: GPL-2.0
/*
 * Minimal libbpf loader for paccp.bpf.o (driven by python/paccp/datapath/loader.py).
 *
 *   paccp_loader load OBJ PINDIR     load the object, pin every map under PINDIR (LIBBPF_PIN_BY_NAME),
 *                                    register the struct_ops "paccp", pin it as PINDIR/paccp_ops and
 *                                    the sockops program as PINDIR/sockops
 *   paccp_loader unload PINDIR       unregister the struct_ops (the caller removes the pins)
 *
 * Exit 0 on success; on failure one line on stderr and exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static int silent(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_WARN)
		return vfprintf(stderr, fmt, args);
	return 0;
}

static int do_load(const char *obj_path, const char *pindir)
{
	char path[512];
	struct bpf_object *obj;
	struct bpf_map *ops;
	struct bpf_program *prog;
	struct bpf_link *link;
	int err;

	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pindir);
	obj = bpf_object__open_file(obj_path, &opts);
	if (!obj) {
		fprintf(stderr, "cannot open %s: %s\n", obj_path, strerror(errno));
		return 1;
	}
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "cannot load %s: %s\n", obj_path, strerror(-err));
		return 1;
	}
	ops = bpf_object__find_map_by_name(obj, "paccp_ops");
	if (!ops) {
		fprintf(stderr, "struct_ops map paccp_ops missing\n");
		return 1;
	}
	link = bpf_map__attach_struct_ops(ops);
	if (!link) {
		fprintf(stderr, "cannot register struct_ops paccp: %s\n", strerror(errno));
		return 1;
	}
	bpf_link__disconnect(link);
	bpf_link__destroy(link);
	snprintf(path, sizeof(path), "%s/paccp_ops", pindir);
	if (bpf_obj_pin(bpf_map__fd(ops), path)) {
		fprintf(stderr, "cannot pin %s: %s\n", path, strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "paccp_sockops");
	snprintf(path, sizeof(path), "%s/sockops", pindir);
	if (!prog || bpf_program__pin(prog, path)) {
		fprintf(stderr, "cannot pin %s: %s\n", path, strerror(errno));
		return 1;
	}
	bpf_object__close(obj);
	return 0;
}

static int do_unload(const char *pindir)
{
	char path[512];
	int fd, zero = 0;

	snprintf(path, sizeof(path), "%s/paccp_ops", pindir);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (bpf_map_delete_elem(fd, &zero)) {
		fprintf(stderr, "cannot unregister paccp: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	libbpf_set_print(silent);
	umask(077);
	if (argc == 4 && !strcmp(argv[1], "load"))
		return do_load(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "unload"))
		return do_unload(argv[2]);
	fprintf(stderr, "usage: paccp_loader load OBJ PINDIR | unload PINDIR\n");
	return 2;
}
