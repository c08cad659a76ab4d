import { own, processOutput } from "./output.js";
import type { Command } from "commander";
import { VakError } from "../policy/errors.js";
import { presetNames } from "../policy/presets.js";

/**
 * `vak completion bash|zsh|fish`: a completion script made from the commander
 * definitions the CLI itself parses with, so that it cannot drift from them.
 * Each script walks the words typed so far the same way (skipping options and
 * the values of options that take one, stopping at `--`) to find which
 * command is being completed, then offers its subcommands, its options, the
 * values an option takes (its choices, files or directories), or, after `--`,
 * commands.
 *
 * The script is code a shell runs: every name put in it is checked to be
 * plain (letters, digits, `-`, `_`, `.`, `:`), and descriptions are quoted
 * for the shell that reads them.
 */
export type Shell = "bash" | "zsh" | "fish";

/**
 * What to complete as an option's (or an argument's) value. `profiles`: Vak's presets (put in the script) and the
 * profiles of the user's own config, which the script reads itself when asked ([profiles.NAME] headers, names of
 * plain characters only, a regular file only): it never runs a program, and never reads a repository's config.
 */
type Values = { kind: "choices"; list: string[] } | { kind: "file" } | { kind: "dir" } | { kind: "none"; hint: string } | { kind: "profiles"; presets: string[] };

interface Opt {
  names: string[];
  description: string;
  /** Undefined for a flag that takes no value. */
  value?: Values | undefined;
}

interface Cmd {
  path: string;
  description: string;
  subs: Cmd[];
  options: Opt[];
  /** What the positional arguments take. */
  args?: Values | undefined;
  /** `--` then a command line (exec, mcp). */
  command: boolean;
}

const PLAIN = /^[A-Za-z0-9_.:=-]+$/;

/**
 * A `[profiles.NAME]` header of the user's config: one regular expression that bash's and zsh's `=~` (POSIX ERE)
 * and fish's `string` (PCRE2) read alike, in single quotes in each (no quote or backslash pair in it). Group 1 is
 * the name (in double quotes when it has a dot), of plain characters only, so that nothing in the file reaches a
 * shell as anything but a word.
 */
const PROFILE_HEADER = String.raw`^[[:space:]]*\[[[:space:]]*profiles\.("[A-Za-z0-9_.-]+"|[A-Za-z0-9_-]+)[[:space:]]*\]`;

function plain(s: string): string {
  if (!PLAIN.test(s)) throw new VakError("internal", `completion: ${JSON.stringify(s)} is not a plain name`);
  return s;
}

/** A value placeholder's name says what it is: <dir>, <paths>, <file>, <spec>, <config>. */
function valuesOf(placeholder: string, choices: readonly string[] | undefined): Values {
  if (choices?.length) return { kind: "choices", list: choices.map(plain) };
  const p = placeholder.replace(/[<>[\].]/g, "");
  if (p === "dir") return { kind: "dir" };
  if (["paths", "file", "spec", "config"].includes(p)) return { kind: "file" };
  return { kind: "none", hint: p };
}

function model(c: Command, presets: string[], parent = ""): Cmd {
  const path = parent ? `${parent} ${plain(c.name())}` : plain(c.name());
  const options: Opt[] = c.options
    .filter((o) => !o.hidden)
    .map((o) => {
      const placeholder = /[<[][^>\]]+[>\]]/.exec(o.flags)?.[0];
      return {
        names: [o.long, o.short].filter((n): n is string => Boolean(n)).map(plain),
        description: o.description ?? "",
        value: !(o.required || o.optional) ? undefined : o.long === "--profile" ? { kind: "profiles" as const, presets } : valuesOf(placeholder ?? "", o.argChoices),
      };
    });
  options.push({ names: ["--help", "-h"], description: "show help for this command" });
  const arg = c.registeredArguments[0];
  const command = arg?.variadic === true && c.registeredArguments.length === 1 && /command/.test(arg.name());
  return {
    path,
    description: c.description() ?? "",
    subs: c.commands.map((s) => model(s, presets, path)),
    options,
    args: arg && !command ? valuesOf(arg.name() === "spec" ? "spec" : arg.name(), arg.argChoices) : undefined,
    command,
  };
}

function all(c: Cmd): Cmd[] {
  return [c, ...c.subs.flatMap(all)];
}

const valued = (c: Cmd) => c.options.filter((o) => o.value).flatMap((o) => o.names);

// ---- bash ----

function bash(root: Cmd): string {
  const cmds = all(root);
  const cases = (f: (c: Cmd) => string) => cmds.map((c) => `    "${c.path}") echo "${f(c)}" ;;`).join("\n");
  const valueCases = cmds
    .flatMap((c) => c.options.filter((o) => o.value && o.value.kind !== "none").flatMap((o) => o.names.map((n) => `    "${c.path}|${n}") echo "${bashValues(o.value!)}" ;;`)))
    .join("\n");
  const argCases = cmds.filter((c) => c.args && c.args.kind !== "none").map((c) => `    "${c.path}") echo "${bashValues(c.args!)}" ;;`).join("\n");
  const commandCases = cmds.filter((c) => c.command).map((c) => `"${c.path}"`).join("|");
  return `# bash completion for vak, made by \`vak completion bash\` from Vak's own command definitions.
_vak_subs() {
  case "$1" in
${cases((c) => c.subs.map((s) => s.path.split(" ").at(-1)).join(" "))}
  esac
}
_vak_opts() {
  case "$1" in
${cases((c) => c.options.flatMap((o) => o.names).join(" "))}
  esac
}
_vak_valued() {
  case "$1" in
${cases((c) => valued(c).join(" "))}
  esac
}
_vak_values() {
  case "$1|$2" in
${valueCases}
  esac
}
_vak_args() {
  case "$1" in
${argCases}
  esac
}
# Your own profiles: the [profiles.NAME] headers of your config, read here (nothing is run; a repository's config is never read).
_vak_profiles() {
  local f line re='${PROFILE_HEADER}'
  if [[ $XDG_CONFIG_HOME == /* ]]; then f="$XDG_CONFIG_HOME/vak/config.toml"; else f="$HOME/.config/vak/config.toml"; fi
  [[ -f $f && -r $f ]] || return 0
  while IFS= read -r line; do
    [[ $line =~ $re ]] && printf '%s\\n' "\${BASH_REMATCH[1]//\\"/}"
  done < "$f"
}
_vak_fill() {
  case "$1" in
    @dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$2")) ;;
    @file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$2")) ;;
    @profiles:*)
      # A list (git,npm): the part after the last comma is completed, the rest kept.
      local pre="" w="$2" names n
      if [[ $w == *,* ]]; then pre="\${w%,*},"; w="\${w##*,}"; fi
      names="\${1#@profiles:} $(_vak_profiles)"
      for n in $names; do [[ $n == "$w"* ]] && COMPREPLY+=("$pre$n"); done ;;
    *) COMPREPLY=($(compgen -W "$1" -- "$2")) ;;
  esac
}
_vak() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="vak" i w skip=0 dashdash=0 operands=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    if [[ $w == -- ]]; then dashdash=1; break; fi
    if [[ $w == -* ]]; then
      if [[ $w != *=* && " $(_vak_valued "$cmd") " == *" $w "* ]]; then skip=1; fi
      continue
    fi
    if ((operands == 0)) && [[ " $(_vak_subs "$cmd") " == *" $w "* ]]; then cmd="$cmd $w"; else operands=$((operands + 1)); fi
  done
  COMPREPLY=()
  if ((dashdash)); then
    case "$cmd" in
      ${commandCases || '""'}) if ((i + 1 == COMP_CWORD)); then COMPREPLY=($(compgen -c -- "$cur")); else compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); fi ;;
    esac
    return 0
  fi
  if ((skip)); then
    local v; v="$(_vak_values "$cmd" "$prev")"
    [[ -n $v ]] && _vak_fill "$v" "$cur"
    return 0
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_vak_opts "$cmd")" -- "$cur"))
    return 0
  fi
  local a; a="$(_vak_args "$cmd")"
  if ((operands == 0)); then
    local subs; subs="$(_vak_subs "$cmd")"
    if [[ -n $subs ]]; then COMPREPLY=($(compgen -W "$subs" -- "$cur")); return 0; fi
  fi
  [[ -n $a ]] && _vak_fill "$a" "$cur"
  return 0
}
complete -F _vak vak
`;
}

function bashValues(v: Values): string {
  return v.kind === "choices" ? v.list.join(" ") : v.kind === "file" ? "@file" : v.kind === "dir" ? "@dir" : v.kind === "profiles" ? `@profiles:${v.presets.map(plain).join(" ")}` : "";
}

// ---- zsh ----

const zq = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

function zsh(root: Cmd): string {
  const cmds = all(root);
  const described = (xs: { name: string; description: string }[]) => xs.map((x) => zq(`${x.name.replace(/:/g, "\\:")}:${x.description.replace(/\n/g, " ")}`)).join(" ");
  const subsCases = cmds.filter((c) => c.subs.length).map((c) => `    "${c.path}") subs=(${described(c.subs.map((s) => ({ name: s.path.split(" ").at(-1)!, description: s.description })))}) ;;`).join("\n");
  const optCases = cmds.map((c) => `    "${c.path}") opts=(${described(c.options.flatMap((o) => o.names.map((n) => ({ name: n, description: o.description }))))}) ;;`).join("\n");
  const valuedCases = cmds.map((c) => `    "${c.path}") valued=(${valued(c).join(" ")}) ;;`).join("\n");
  const valueCases = cmds
    .flatMap((c) => c.options.filter((o) => o.value).flatMap((o) => o.names.map((n) => `    "${c.path}|${n}") ${zshValues(o.value!)} ;;`)))
    .join("\n");
  const argCases = cmds.filter((c) => c.args).map((c) => `    "${c.path}") ${zshValues(c.args!)} ;;`).join("\n");
  const commandCases = cmds.filter((c) => c.command).map((c) => `"${c.path}"`).join("|");
  return `#compdef vak
# zsh completion for vak, made by \`vak completion zsh\` from Vak's own command definitions.
# Your own profiles: the [profiles.NAME] headers of your config, read here (nothing is run; a repository's config is never read).
_vak_profiles() {
  emulate -L zsh
  local f line re='${PROFILE_HEADER}'
  if [[ $XDG_CONFIG_HOME == /* ]]; then f="$XDG_CONFIG_HOME/vak/config.toml"; else f="$HOME/.config/vak/config.toml"; fi
  [[ -f $f && -r $f ]] || return 0
  while IFS= read -r line; do
    [[ $line =~ $re ]] && print -r -- "\${match[1]//\\"/}"
  done < "$f"
}
_vak_valued() {
  case "$1" in
${valuedCases}
  esac
}
_vak() {
  local cmd=vak w skip=0 dashdash=0 operands=0 i
  local -a valued subs opts
  for ((i = 2; i < CURRENT; i++)); do
    w=\${words[i]}
    if ((skip)); then skip=0; continue; fi
    if [[ $w == -- ]]; then dashdash=1; break; fi
    valued=(); _vak_valued "$cmd"
    if [[ $w == -* ]]; then
      if [[ $w != *=* ]] && (( \${valued[(Ie)$w]} )); then skip=1; fi
      continue
    fi
    subs=()
    case "$cmd" in
${subsCases}
    esac
    if ((operands == 0)) && (( \${subs[(I)\${(b)w}:*]} )); then cmd="$cmd $w"; else operands=$((operands + 1)); fi
  done
  if ((dashdash)); then
    case "$cmd" in
      ${commandCases || '""'}) if ((i + 1 == CURRENT)); then _command_names -e; else _files; fi ;;
    esac
    return
  fi
  if ((skip)); then
    case "$cmd|\${words[CURRENT-1]}" in
${valueCases}
    esac
    return
  fi
  if [[ \${words[CURRENT]} == -* ]]; then
    opts=()
    case "$cmd" in
${optCases}
    esac
    _describe -t options option opts
    return
  fi
  subs=()
  case "$cmd" in
${subsCases}
  esac
  if ((operands == 0 && \${#subs})); then _describe -t commands command subs; return; fi
  case "$cmd" in
${argCases}
  esac
}
if (( $+functions[compdef] )); then
  compdef _vak vak
else
  print -u2 "vak: the zsh completion needs compinit first: autoload -Uz compinit && compinit"
fi
`;
}

function zshValues(v: Values): string {
  switch (v.kind) {
    case "choices": return `compadd -- ${v.list.join(" ")}`;
    case "file": return "_files";
    case "dir": return "_directories";
    case "none": return `_message ${zq(v.hint || "a value")}`;
    case "profiles": return `compset -P '*,'; compadd -- ${v.presets.map(plain).join(" ")} $(_vak_profiles)`;
  }
}

// ---- fish ----

const fq = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, " ")}'`;

function fish(root: Cmd): string {
  const cmds = all(root);
  const subsCases = cmds.filter((c) => c.subs.length).map((c) => `    case ${fq(c.path)}\n      echo ${c.subs.map((s) => s.path.split(" ").at(-1)).join(" ")}`).join("\n");
  const valuedCases = cmds.map((c) => `    case ${fq(c.path)}\n      echo ${valued(c).join(" ") || "''"}`).join("\n");
  const lines: string[] = [];
  for (const c of cmds) {
    const when = `'__vak_at ${c.path}'`;
    for (const s of c.subs) lines.push(`complete -c vak -n '__vak_at ${c.path} ; and __vak_operand' -a ${s.path.split(" ").at(-1)} -d ${fq(s.description)}`);
    for (const o of c.options) {
      const names = o.names.map((n) => (n.startsWith("--") ? `-l ${n.slice(2)}` : `-s ${n.slice(1)}`)).join(" ");
      const value = !o.value ? "" : o.value.kind === "choices" ? ` -x -a ${fq(o.value.list.join(" "))}` : o.value.kind === "file" ? " -r -F" : o.value.kind === "dir" ? " -x -a '(__fish_complete_directories)'" : o.value.kind === "profiles" ? ` -x -a ${fq(`(__vak_profiles ${o.value.presets.map(plain).join(" ")})`)}` : " -x";
      lines.push(`complete -c vak -n ${when} ${names}${value} -d ${fq(o.description)}`);
    }
    if (c.args?.kind === "choices") lines.push(`complete -c vak -n '__vak_at ${c.path} ; and __vak_operand' -a ${fq(c.args.list.join(" "))}`);
    if (c.args?.kind === "file") lines.push(`complete -c vak -n '__vak_at ${c.path} ; and __vak_operand' -F`);
    if (c.command) lines.push(`complete -c vak -n '__vak_at ${c.path} --' -a '(__fish_complete_command)'`);
  }
  return `# fish completion for vak, made by \`vak completion fish\` from Vak's own command definitions.
function __vak_subs
  switch $argv[1]
${subsCases}
  end
end
function __vak_valued
  switch $argv[1]
${valuedCases}
  end
end
# The command being completed ("vak journal"), with " --" once a -- was typed; and the operands before the cursor.
function __vak_walk
  set -l tokens (commandline -opc)
  set -l cmd vak
  set -l skip 0
  set -l operands 0
  for w in $tokens[2..-1]
    if test $skip = 1
      set skip 0
      continue
    end
    if test "$w" = --
      echo "$cmd --"
      echo $operands
      return
    end
    if string match -q -- '-*' $w
      if not string match -q -- '*=*' $w; and contains -- $w (string split ' ' -- (__vak_valued "$cmd"))
        set skip 1
      end
      continue
    end
    if test $operands = 0; and contains -- $w (string split ' ' -- (__vak_subs "$cmd"))
      set cmd "$cmd $w"
    else
      set operands (math $operands + 1)
    end
  end
  echo $cmd
  echo $operands
end
# Profile names: the presets given, and the [profiles.NAME] headers of your config, read here (nothing is run; a
# repository's config is never read); in a list (git,npm) each after what is typed up to the last comma.
function __vak_profiles
  set -l f $HOME/.config/vak/config.toml
  string match -q -- '/*' "$XDG_CONFIG_HOME"; and set f $XDG_CONFIG_HOME/vak/config.toml
  set -l names $argv
  if test -f $f -a -r $f
    for m in (string replace -rf -- '${PROFILE_HEADER}.*' '$1' < $f | string trim -c '"')
      string match -qr -- '^[A-Za-z0-9_.-]+$' $m; and set -a names $m
    end
  end
  set -l pre (string replace -r -- '[^,]*$' '' (commandline -ct))
  for n in $names
    printf '%s%s\\n' $pre $n
  end
end
function __vak_at
  set -l walked (__vak_walk)
  test "$walked[1]" = "$argv"
end
function __vak_operand
  set -l walked (__vak_walk)
  test "$walked[2]" = 0
end
complete -c vak -f
${lines.join("\n")}
`;
}

export function completionScript(shell: Shell, program: Command, presets: string[] = []): string {
  const root = model(program, presets);
  switch (shell) {
    case "bash": return bash(root);
    case "zsh": return zsh(root);
    case "fish": return fish(root);
  }
}

export function completionCommand(shell: Shell, program: Command): number {
  // A script Vak wrote from its own commands and options, for a shell to read.
  processOutput().out.line(own(completionScript(shell, program, presetNames()).replace(/\n$/, "")));
  return 0;
}
