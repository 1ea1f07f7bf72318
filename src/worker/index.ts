// The Pinboard worker library: `import { startWorker, defineInstance } from "pinboard/worker"`.
// Guide: docs/worker.md.
export { makeWorker, type RunningWorker, type WorkerOptions } from "./Worker.js"
export type { LogLine, WorkerLog } from "./WorkerLog.js"
export { startWorker, type PinboardWorker } from "./StartWorker.js"
export { WorkerCredentialError, type WorkerCredentialSource } from "./Credential.js"
export type { TracesOptions } from "./Tracing.js"
export {
  defineInstance,
  type ActivationContext,
  type CallInit,
  type CallInstance,
  type DeactivateReason,
  type InstanceDefinition,
  type InstanceRequest,
  type RequestIdentity,
  type RouteHandler
} from "./Definition.js"
export { compareEpochs, isEpoch } from "../contract/Epochs.js"
export { FencedStore, StaleEpochError, type FencedStoreClient, type FencedStoreOptions } from "./FencedStore.js"
export {
  httpRegistryClient,
  type HostnameEnv,
  type PlacementRef,
  type PublishedKey,
  type RegistryClient,
  type WindDownEntry
} from "./RegistryClient.js"
