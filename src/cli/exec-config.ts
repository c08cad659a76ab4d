/**
 * What `vak exec` loads only when there is a config file to read, or a preset
 * the build's compiled copy cannot give (changed since): the TOML parser, the
 * presets, the repository config and its trust records. One chunk of the CLI
 * bundle, loaded on demand. (The credential strippers are not here: a preset
 * that shows a file without its credentials, git's or npm's, needs no TOML.)
 */
export { loadUserProfiles, shownPath } from "../policy/profiles-file.js";
export { loadPreset, presetNames } from "../policy/presets.js";
export { loadProject, readTrust } from "../policy/trust.js";
