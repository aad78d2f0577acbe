// SPDX-License-Identifier: GPL-2.0
/*
 * Minimal libbpf loader for the project's BPF objects (driven by python/paccp/datapath/core/env.py for
 * every scheme: paccp, softbw, mptcp).
 *
 *   paccp_loader load OBJ PINDIR     load the object, pin every map under PINDIR (LIBBPF_PIN_BY_NAME),
 *                                    register each struct_ops map and pin it as PINDIR/<map name>, pin
 *                                    each sockops / cgroup sockopt / tc program as PINDIR/<program
 *                                    name> (the caller attaches them), attach each tracing
 *                                    (tp_btf) program and pin its link as PINDIR/<program name>_link
 *   paccp_loader unload PINDIR NAME  unregister the struct_ops pinned as PINDIR/NAME (the caller removes
 *                                    the pins)
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
	struct bpf_map *map;
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
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) != BPF_MAP_TYPE_STRUCT_OPS)
			continue;
		link = bpf_map__attach_struct_ops(map);
		if (!link) {
			fprintf(stderr, "cannot register struct_ops %s: %s\n", bpf_map__name(map),
				strerror(errno));
			return 1;
		}
		bpf_link__disconnect(link);
		bpf_link__destroy(link);
		snprintf(path, sizeof(path), "%s/%s", pindir, bpf_map__name(map));
		if (bpf_obj_pin(bpf_map__fd(map), path)) {
			fprintf(stderr, "cannot pin %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	bpf_object__for_each_program(prog, obj) {
		enum bpf_prog_type t = bpf_program__type(prog);

		if (t == BPF_PROG_TYPE_SOCK_OPS || t == BPF_PROG_TYPE_CGROUP_SOCKOPT ||
		    t == BPF_PROG_TYPE_SCHED_CLS) {
			snprintf(path, sizeof(path), "%s/%s", pindir, bpf_program__name(prog));
			if (bpf_program__pin(prog, path)) {
				fprintf(stderr, "cannot pin %s: %s\n", path, strerror(errno));
				return 1;
			}
		} else if (t == BPF_PROG_TYPE_TRACING) {
			snprintf(path, sizeof(path), "%s/%s_link", pindir, bpf_program__name(prog));
			link = bpf_program__attach(prog);
			if (!link || bpf_link__pin(link, path)) {
				fprintf(stderr, "cannot attach/pin %s: %s\n", path, strerror(errno));
				return 1;
			}
			bpf_link__disconnect(link);
			bpf_link__destroy(link);
		}
	}
	bpf_object__close(obj);
	return 0;
}

static int do_unload(const char *pindir, const char *name)
{
	char path[512];
	int fd, zero = 0;

	snprintf(path, sizeof(path), "%s/%s", pindir, name);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (bpf_map_delete_elem(fd, &zero)) {
		fprintf(stderr, "cannot unregister %s: %s\n", name, strerror(errno));
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
	if (argc == 4 && !strcmp(argv[1], "unload"))
		return do_unload(argv[2], argv[3]);
	fprintf(stderr, "usage: paccp_loader load OBJ PINDIR | unload PINDIR NAME\n");
	return 2;
}
