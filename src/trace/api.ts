// What xfn trace reads from an API server: JSON GETs through a kubeconfig
// (client-node's, so certificates, tokens and exec plugins work as with
// kubectl), and discovery, to turn what a user types (xbuckets, XBuckets,
// xbuckets.example.org, xb) and what a reference names (apiVersion and kind)
// into a path.
import { request as httpRequest } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { JsonObject } from "@bufbuild/protobuf";
import type { KubeConfig } from "@kubernetes/client-node";
import { isObject } from "../json.js";

/** ApiFailure is an answer that is not 2xx, with the API server's message. */
export class ApiFailure extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** Api reads JSON from an API server. */
export interface Api {
  get(path: string): Promise<JsonObject>;
}

/** kubeApi is an Api through kc's current context; each GET is given up after timeoutMs. */
export function kubeApi(kc: KubeConfig, timeoutMs = 30_000): Api {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster (set a context with kubectl config use-context)");
  const base = new URL(cluster.server);
  return {
    async get(path: string): Promise<JsonObject> {
      const url = new URL(`${base.pathname.replace(/\/$/, "")}${path}`, base);
      const opts: RequestOptions = { method: "GET", headers: { Accept: "application/json" } };
      await kc.applyToHTTPSOptions(opts);
      const send = url.protocol === "https:" ? httpsRequest : httpRequest;
      return new Promise((resolve, reject) => {
        const req = send(url, opts, (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(body);
            } catch {
              parsed = undefined;
            }
            const code = res.statusCode ?? 0;
            if (code >= 200 && code < 300 && isObject(parsed as JsonObject)) return resolve(parsed as JsonObject);
            const message =
              isObject(parsed as JsonObject) && typeof (parsed as JsonObject)["message"] === "string"
                ? String((parsed as JsonObject)["message"])
                : body.trim().slice(0, 200) || `HTTP ${code}`;
            reject(new ApiFailure(code, message));
          });
        });
        req.setTimeout(timeoutMs, () => req.destroy(new Error(`GET ${path}: no answer within ${timeoutMs / 1000} s`)));
        req.on("error", (err) => reject(new Error(`cannot reach the API server at ${base.origin}: ${err.message}`)));
        req.end();
      });
    },
  };
}

/** Resource is one kind an API server serves. */
export interface Resource {
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames: string[];
}

/** Discovery finds kinds by what users type and by apiVersion and kind, reading each group version once. */
export class Discovery {
  private readonly versions = new Map<string, Promise<Resource[]>>();
  private groups?: Promise<Array<{ group: string; versions: string[]; preferred: string }>>;

  constructor(private readonly api: Api) {}

  /** resources are the kinds one group version serves (not subresources). */
  resources(group: string, version: string): Promise<Resource[]> {
    const key = `${group}/${version}`;
    let p = this.versions.get(key);
    if (!p) {
      p = this.api.get(group ? `/apis/${group}/${version}` : `/api/${version}`).then((list) =>
        (Array.isArray(list["resources"]) ? list["resources"] : []).filter(isObject).flatMap((r) =>
          typeof r["name"] === "string" && !r["name"].includes("/")
            ? [
                {
                  group,
                  version,
                  plural: r["name"],
                  singular:
                    typeof r["singularName"] === "string" && r["singularName"] ? r["singularName"] : String(r["kind"]).toLowerCase(),
                  kind: String(r["kind"]),
                  namespaced: r["namespaced"] === true,
                  shortNames: Array.isArray(r["shortNames"]) ? r["shortNames"].filter((s): s is string => typeof s === "string") : [],
                },
              ]
            : [],
        ),
      );
      this.versions.set(key, p);
    }
    return p;
  }

  /** forKind is the kind an apiVersion and kind name (a reference), or undefined if not served. */
  async forKind(apiVersion: string, kind: string): Promise<Resource | undefined> {
    const i = apiVersion.lastIndexOf("/");
    const group = i < 0 ? "" : apiVersion.slice(0, i);
    const version = i < 0 ? apiVersion : apiVersion.slice(i + 1);
    try {
      return (await this.resources(group, version)).find((r) => r.kind === kind);
    } catch (err) {
      if (err instanceof ApiFailure && err.code === 404) return undefined;
      throw err;
    }
  }

  private allGroups(): Promise<Array<{ group: string; versions: string[]; preferred: string }>> {
    this.groups ??= Promise.all([this.api.get("/api"), this.api.get("/apis")]).then(([core, apis]) => [
      { group: "", versions: ["v1"], preferred: Array.isArray(core["versions"]) ? String(core["versions"][0] ?? "v1") : "v1" },
      ...(Array.isArray(apis["groups"]) ? apis["groups"] : []).filter(isObject).map((g) => {
        const versions = (Array.isArray(g["versions"]) ? g["versions"] : []).filter(isObject).map((v) => String(v["version"]));
        const preferred = isObject(g["preferredVersion"]) ? String(g["preferredVersion"]["version"]) : (versions[0] ?? "");
        return { group: String(g["name"]), versions, preferred };
      }),
    ]);
    return this.groups;
  }

  /**
   * find resolves TYPE[.VERSION][.GROUP] as kubectl does: a plural, singular,
   * kind or short name, in the group's preferred version unless one is named.
   * It throws naming the type when nothing (or more than one group) serves it.
   */
  async find(type: string): Promise<Resource> {
    const [name, ...rest] = type.split(".");
    const lower = name!.toLowerCase();
    const suffix = rest.join(".");
    const groups = await this.allGroups();
    const candidates: Array<{ group: string; version: string }> = [];
    for (const g of groups) {
      if (!suffix) candidates.push({ group: g.group, version: g.preferred });
      else if (g.group === suffix) candidates.push({ group: g.group, version: g.preferred });
      else
        for (const v of g.versions)
          if (`${v}.${g.group}` === suffix || (g.group === "" && v === suffix)) candidates.push({ group: g.group, version: v });
    }
    const found: Resource[] = [];
    await Promise.all(
      candidates.map(async (c) => {
        const rs = await this.resources(c.group, c.version).catch(() => [] as Resource[]);
        const r = rs.find(
          (x) => x.plural === lower || x.singular === lower || x.kind.toLowerCase() === lower || x.shortNames.includes(lower),
        );
        if (r) found.push(r);
      }),
    );
    if (found.length === 0) throw new Error(`the server doesn't have a resource type "${type}"`);
    // As kubectl, a name served by the core group or by exactly one group wins; several are ambiguous.
    const core = found.find((r) => r.group === "");
    if (core) return core;
    if (found.length > 1)
      throw new Error(
        `"${type}" is ambiguous: ${found
          .map((r) => `${r.plural}.${r.group}`)
          .sort()
          .join(", ")}; name the group (${found[0]!.plural}.${found[0]!.group})`,
      );
    return found[0]!;
  }
}

/** pathOf is the URL path of an object of kind r, named name (in namespace, for a namespaced kind). */
export function pathOf(r: Resource, name: string, namespace?: string): string {
  const gv = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${gv}${ns}/${r.plural}/${encodeURIComponent(name)}`;
}
