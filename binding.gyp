{
  "targets": [
    {
      "target_name": "vak-launcher",
      "type": "executable",
      "sources": [
        "native/main.c", "native/args.c", "native/report.c", "native/view.c", "native/caps.c", "native/landlock.c",
        "native/seccomp.c", "native/bpf.c", "native/guard.c", "native/guard_caller.c", "native/guard_path.c",
        "native/guard_rules.c", "native/guard_open.c", "native/guard_files.c", "native/guard_sockets.c", "native/guard_refusals.c", "native/guard_explain.c", "native/guard_noread.c", "native/guard_links.c",
        "native/limits.c", "native/probe.c", "native/relay.c", "native/resolver.c", "native/terminal.c", "native/term_filter.c", "native/hostdir.c"
      ],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fstack-protector-strong", "-D_FORTIFY_SOURCE=2"],
      "ldflags": ["-pie", "-Wl,-z,relro,-z,now"]
    },
    {
      "target_name": "vak-engine",
      "sources": ["native/engine.c", "native/tunnel.c", "native/chunked.c"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fstack-protector-strong", "-D_FORTIFY_SOURCE=2"],
      "ldflags": ["-Wl,-z,relro,-z,now"]
    },
    {
      "target_name": "vak-resident",
      "sources": ["native/resident.c"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fstack-protector-strong", "-D_FORTIFY_SOURCE=2"],
      "ldflags": ["-Wl,-z,relro,-z,now"]
    },
    {
      "target_name": "vak-client",
      "type": "executable",
      "sources": ["native/client.c"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fstack-protector-strong", "-D_FORTIFY_SOURCE=2"],
      "ldflags": ["-pie", "-Wl,-z,relro,-z,now"]
    }
  ]
}
