// Vak as a library: build agents whose every effect goes through the host.
export { createHost, type Host, type HostApprovalRequest, type HostEvent, type HostOptions, type WorkloadSessionHandle } from "./workload/host.js";
/** The neutraliser Vak shows hostile text through: use it before printing what a model or a tool chose (events carry it raw). */
export { visible } from "./text/visible.js";
/** @deprecated the same type as WorkloadSessionHandle, under its first name; kept so that code written against it still builds. */
export type { WorkloadSessionHandle as AgentSessionHandle } from "./workload/host.js";
export { checkSpec, loadSpec, type WorkloadPlan, type WorkloadSpecInput, type ComponentPlan } from "./workload/spec.js";
export type { RunResult, AgentEvent } from "./agent/agent.js";
export type { ModelClient, ModelRequest, ModelTurn, Message } from "./model/types.js";
export { ScriptedClient, type Script } from "./model/scripted.js";
export { OpenAIChatClient } from "./model/openai.js";
export { AnthropicClient } from "./model/anthropic.js";
