// Who the client is and what it may do: the embedded API server has one user,
// who may do everything (as system:masters may on a real cluster), and says so
// when asked, so that `kubectl auth can-i` and `kubectl auth whoami` answer as
// they would. Kinds and fields as in kubernetes/api authorization/v1
// (SelfSubjectAccessReview, SelfSubjectRulesReview) and authentication/v1
// (SelfSubjectReview); the spec check is ValidateSelfSubjectAccessReviewSpec
// (pkg/apis/authorization/validation).
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { ApiError } from "./errors.js";
import { invalid, required } from "../schema/fielderr.js";
import { refusal } from "./refusal.js";

export const USER = "xfn-dev";
const GROUPS = ["system:masters", "system:authenticated"];
const REASON = "the embedded API server has one user, who may do everything";

/** The review kinds, by the path they are created at. */
const REVIEWS: Record<string, { group: string; kind: string; plural: string; answer: (spec: JsonObject) => JsonObject }> = {
  "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": {
    group: "authorization.k8s.io",
    kind: "SelfSubjectAccessReview",
    plural: "selfsubjectaccessreviews",
    answer: (spec) => {
      const resource = spec["resourceAttributes"];
      const other = spec["nonResourceAttributes"];
      if ((resource === undefined || resource === null) === (other === undefined || other === null))
        throw refusal("authorization.k8s.io", "SelfSubjectAccessReview", "", [
          invalid(
            "spec.resourceAttributes",
            isObject(resource) ? "{...}" : null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
          ),
        ]);
      return { allowed: true, reason: REASON };
    },
  },
  "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews": {
    group: "authorization.k8s.io",
    kind: "SelfSubjectRulesReview",
    plural: "selfsubjectrulesreviews",
    answer: (spec) => {
      if (typeof spec["namespace"] !== "string" || spec["namespace"] === "")
        throw refusal("authorization.k8s.io", "SelfSubjectRulesReview", "", [required("spec.namespace")]);
      return {
        resourceRules: [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }],
        nonResourceRules: [{ verbs: ["*"], nonResourceURLs: ["*"] }],
        incomplete: false,
      };
    },
  },
  "/apis/authentication.k8s.io/v1/selfsubjectreviews": {
    group: "authentication.k8s.io",
    kind: "SelfSubjectReview",
    plural: "selfsubjectreviews",
    answer: () => ({ userInfo: { username: USER, groups: GROUPS } }),
  },
};

/** isReview says whether path is where a review is created. */
export const isReview = (path: string): boolean => Object.hasOwn(REVIEWS, path);

/** review answers a review created at path with body: the review, its status filled in. */
export function review(path: string, method: string, body: unknown): JsonObject {
  const r = REVIEWS[path]!;
  if (method !== "POST") throw new ApiError(405, "MethodNotAllowed", `${method} is not allowed on ${r.plural}: only create`);
  if (!isObject(body)) throw new ApiError(400, "BadRequest", "the request body must be an object");
  const spec = isObject(body["spec"]) ? body["spec"] : {};
  return {
    kind: r.kind,
    apiVersion: `${r.group}/v1`,
    metadata: { creationTimestamp: null },
    ...(r.kind === "SelfSubjectReview" ? {} : { spec }),
    status: r.answer(spec),
  };
}

/** reviewGroups are the review kinds' API groups and resources, for discovery. */
export function reviewResources(groupVersion: string): JsonObject[] | undefined {
  const out = Object.values(REVIEWS)
    .filter((r) => `${r.group}/v1` === groupVersion)
    .map((r) => ({ name: r.plural, singularName: "", namespaced: false, kind: r.kind, verbs: ["create"] }));
  return out.length ? out : undefined;
}

export const REVIEW_GROUPS = ["authentication.k8s.io", "authorization.k8s.io"];
