/**
 * What `vak exec` loads only when there is a config file to read, or a preset
 * the build's compiled copy cannot give (changed since, or one that strips a
 * file's credentials): the TOML parser, the presets, the repository config and
 * its trust records, the credential stripper. One chunk of the CLI bundle,
 * loaded on demand.
 */
export { loadUserProfiles, readConfigText, shownPath } from "../policy/profiles-file.js";
export { loadPreset, presetNames } from "../policy/presets.js";
export { loadProject, readTrust } from "../policy/trust.js";
export { stripCredentials } from "../policy/strip-credentials.js";
