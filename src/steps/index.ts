// The built-in lifecycle steps.
export { externalName, incompleteCreate, DEFAULT_EXTERNAL_NAMES_FIELD, type ExternalNameOptions } from "./external-name.js";
export { lateInit, allowsLateInit, type LateInitOptions } from "./late-init.js";
export { readiness, CHECK_TYPES, type ReadinessCheck, type ReadinessOptions } from "./readiness.js";
export {
  dependencies,
  parseWaitFor,
  XR,
  WAITING_FIELD,
  type Dependency,
  type DependenciesOptions,
  type DependencySettings,
} from "./dependencies.js";
export {
  releaseUsages,
  usageKey,
  isOwnUsage,
  hasOwnUsages,
  USAGE_API_VERSION,
  USAGE_OF,
  USAGE_BY,
  DELETION_ORDER_TYPE,
  HOST_CONTEXT_KEY,
  type UsageOptions,
} from "./usages.js";
export { deletion, DELETION_FIELD, type DeletionOptions } from "./deletion.js";
export { CycleError } from "./graph.js";
export { parseDuration, formatDuration } from "./duration.js";
export { statusSchema, STATUS_SCHEMA_REQUIREMENT, type StatusSchemaOptions } from "./status-schema.js";
export { includeWhen, type IncludeWhenOptions } from "./include-when.js";
export { compile as compileExpression, evaluate as evaluateExpression, variables as expressionVariables } from "./cel.js";
export { summary, describeStep, describeTrail, SUMMARY_TYPE, MAX_SUMMARY, type SummaryOptions } from "./summary.js";
export { rollUp, whyUnhealthy, HEALTH_TYPE, NOT_SYNCED, type Health } from "./health.js";
