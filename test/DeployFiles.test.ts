import { describe, expect, it } from "@effect/vitest"
import { Deployment, type IDeployment } from "kubernetes-models/apps/v1/Deployment"
import { type INetworkPolicy, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy"
import type { INetworkPolicyPeer } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicyPeer"
import { type IPodDisruptionBudget, PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget"
import type { IContainer } from "kubernetes-models/v1/Container"
import { type ISecret, Secret } from "kubernetes-models/v1/Secret"
import { type IService, Service } from "kubernetes-models/v1/Service"
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { basename, dirname, join, relative } from "node:path"
import ts from "typescript"
import { builtExecutable } from "./support/Build.js"
import { setupCommand } from "./support/DebianPackages.js"
import { freePort, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

const root = new URL("..", import.meta.url).pathname
const kubernetesFolder = join(root, "deploy", "kubernetes")
const unitFile = join(root, "deploy", "systemd", "petstore.service")
const envFile = join(root, "deploy", "systemd", "petstore.env")
const credentialFile = join(root, "deploy", "systemd", "database-url")

/** The service's defaults (docs/configuration.md), for what a file leaves unset. */
const defaults = {
  PORT: "3000",
  METRICS_PORT: "9464",
  STOP_GRACE_SECONDS: "5",
  DRAIN_TIMEOUT_SECONDS: "10",
  DATABASE_START_TIMEOUT_SECONDS: "30"
}

/** The most a stop takes (docs/operations.md#stopping): whatever stops the service must wait longer before it kills. */
const stopBound = (env: Readonly<Record<string, string | undefined>>) =>
  Number(env.STOP_GRACE_SECONDS ?? defaults.STOP_GRACE_SECONDS) +
  Number(env.DRAIN_TIMEOUT_SECONDS ?? defaults.DRAIN_TIMEOUT_SECONDS) + 2

// Kubernetes ------------------------------------------------------------------------------------

type Manifest = { readonly file: string; readonly object: Record<string, unknown> }

/** Every object of every YAML file under the folder, with the file it came from. */
const readManifests = (folder: string): Array<Manifest> =>
  readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .flatMap((entry) => {
      const file = join(entry.parentPath, entry.name)
      const parsed: unknown = Bun.YAML.parse(readFileSync(file, "utf8"))
      // A file of several documents parses to an array of them.
      const documents = Array.isArray(parsed) ? parsed : [parsed]
      return documents.filter((object) => object != null).map((object) => ({ file: relative(root, file), object }))
    })

const models = {
  "apps/v1 Deployment": { model: Deployment, declaration: ["apps/v1/Deployment.d.ts", "IDeployment"] },
  "v1 Service": { model: Service, declaration: ["v1/Service.d.ts", "IService"] },
  "policy/v1 PodDisruptionBudget": {
    model: PodDisruptionBudget,
    declaration: ["policy/v1/PodDisruptionBudget.d.ts", "IPodDisruptionBudget"]
  },
  "v1 Secret": { model: Secret, declaration: ["v1/Secret.d.ts", "ISecret"] },
  "networking.k8s.io/v1 NetworkPolicy": {
    model: NetworkPolicy,
    declaration: ["networking.k8s.io/v1/NetworkPolicy.d.ts", "INetworkPolicy"]
  }
} as const

type Kind = keyof typeof models

const kindOf = (object: Record<string, unknown>) => `${String(object.apiVersion)} ${String(object.kind)}`
const isKind = (kind: string): kind is Kind => kind in models

/**
 * The paths of an object's fields that its Kubernetes type does not have. The schemas of
 * `kubernetes-models` let unknown fields through, where `kubectl apply` (strict field validation)
 * refuses them; the package's TypeScript declarations, made from the same OpenAPI document, name
 * every field.
 */
const unknownFields = (() => {
  let program: ts.Program | undefined
  const declarationPath = (file: string) => join(root, "node_modules", "kubernetes-models", file)
  const typeOf = (kind: Kind) => {
    program ??= ts.createProgram(Object.values(models).map(({ declaration }) => declarationPath(declaration[0])), {
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      noEmit: true,
      types: []
    })
    const checker = program.getTypeChecker()
    const [file, name] = models[kind].declaration
    const module = checker.getSymbolAtLocation(program.getSourceFile(declarationPath(file))!)!
    const symbol = checker.getExportsOfModule(module).find((exported) => exported.name === name)!
    return { checker, type: checker.getDeclaredTypeOfSymbol(symbol) }
  }
  const walk = (checker: ts.TypeChecker, value: unknown, declared: ts.Type, path: string): Array<string> => {
    const type = checker.getNonNullableType(declared)
    if (Array.isArray(value)) {
      if (!checker.isArrayType(type)) return []
      const element = checker.getTypeArguments(type as ts.TypeReference)[0]!
      return value.flatMap((item, i) => walk(checker, item, element, `${path}[${i}]`))
    }
    if (value === null || typeof value !== "object") return []
    // A map (labels, stringData, resources' limits): any key, each value of one type.
    const values = checker.getIndexTypeOfType(type, ts.IndexKind.String)
    if (values) return Object.entries(value).flatMap(([key, item]) => walk(checker, item, values, `${path}.${key}`))
    // A value of a type without fields (IntOrString, Quantity) is the schema's to check.
    if (checker.getPropertiesOfType(type).length === 0) return []
    return Object.entries(value).flatMap(([key, item]) => {
      const property = type.getProperty(key)
      return property ? walk(checker, item, checker.getTypeOfSymbol(property), `${path}.${key}`) : [`${path}.${key}`]
    })
  }
  return (kind: Kind, object: Record<string, unknown>): Array<string> => {
    const { checker, type } = typeOf(kind)
    return walk(checker, object, type, kind.split(" ")[1]!)
  }
})()

type LabelSelector = NonNullable<IPodDisruptionBudget["spec"]>["selector"]

/** Whether a label selector picks pods with these labels; an empty one picks every pod of the namespace. */
const selects = (selector: LabelSelector, labels: Readonly<Record<string, string>>) => {
  const matchLabels = Object.entries(selector?.matchLabels ?? {})
  const expressions = selector?.matchExpressions ?? []
  if (matchLabels.length === 0 && expressions.length === 0) return false
  return matchLabels.every(([key, value]) => labels[key] === value) &&
    expressions.every(({ key, operator, values = [] }) => {
      switch (operator) {
        case "In":
          return labels[key] !== undefined && values.includes(labels[key])
        case "NotIn":
          return labels[key] === undefined || !values.includes(labels[key])
        case "Exists":
          return labels[key] !== undefined
        case "DoesNotExist":
          return labels[key] === undefined
        default:
          return false
      }
    })
}

/** The labels Kubernetes sets on a namespace, naming it. */
const namespaceNamed = (name: string) => ({ "kubernetes.io/metadata.name": name })

/**
 * Whether a NetworkPolicy peer lets in more than the monitoring namespace: an address block, pods of
 * the policy's own namespace, every namespace, or a selector that picks another namespace too.
 */
const beyondMonitoring = (peer: INetworkPolicyPeer) => {
  const selector = peer.namespaceSelector
  if (peer.ipBlock !== undefined || selector === undefined) return true
  const empty = Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0
  return empty || selects(selector, namespaceNamed("default")) ||
    selects(selector, namespaceNamed("petstore-elsewhere"))
}

/** A PodDisruptionBudget's count or percentage of `replicas`, rounded up as Kubernetes does. */
const countOf = (value: number | string, replicas: number) =>
  typeof value === "number" ? value : Math.ceil((replicas * Number(value.replace(/%$/, ""))) / 100)

/** What is wrong with the manifests: each problem a line; none when they are right. */
const kubernetesProblems = (manifests: ReadonlyArray<Manifest>): Array<string> => {
  const problems: Array<string> = []
  const byKind = new Map<Kind, Array<Record<string, unknown>>>()
  for (const { file, object } of manifests) {
    const kind = kindOf(object)
    if (!isKind(kind)) {
      problems.push(`${file}: ${kind} is not one of ${Object.keys(models).join(", ")}`)
      continue
    }
    try {
      new models[kind].model(object as never).validate()
    } catch (error) {
      problems.push(`${file}: ${kind}: ${error instanceof Error ? error.message : String(error)}`)
    }
    for (const field of unknownFields(kind, object)) problems.push(`${file}: unknown field ${field}`)
    byKind.set(kind, [...(byKind.get(kind) ?? []), object])
  }
  const one = <T>(kind: Kind): T | undefined => {
    const objects = byKind.get(kind) ?? []
    if (objects.length !== 1) problems.push(`${objects.length} objects of ${kind}, where 1 is expected`)
    return objects[0] as T | undefined
  }
  const deployment = one<IDeployment>("apps/v1 Deployment")
  const service = one<IService>("v1 Service")
  const budget = one<IPodDisruptionBudget>("policy/v1 PodDisruptionBudget")
  const secret = one<ISecret>("v1 Secret")
  const policy = one<INetworkPolicy>("networking.k8s.io/v1 NetworkPolicy")
  const pod = deployment?.spec?.template
  const containers = pod?.spec?.containers ?? []
  if (!deployment || !pod || containers.length !== 1) {
    problems.push(`the Deployment has ${containers.length} containers, where 1 is expected`)
    return problems
  }
  const container: IContainer = containers[0]!
  const labels = pod.metadata?.labels ?? {}
  const replicas = deployment.spec?.replicas ?? 1

  if (replicas !== 2) problems.push(`the Deployment runs ${replicas} replicas, where 2 are expected`)
  if (!selects(deployment.spec?.selector, labels)) problems.push("the Deployment's selector does not pick its own pods")
  // A node lost must not take every replica.
  const spreads = (pod.spec?.topologySpreadConstraints ?? []).some((constraint) =>
    constraint.topologyKey === "kubernetes.io/hostname" && constraint.maxSkew === 1 &&
    selects(constraint.labelSelector, labels)
  )
  if (!spreads) {
    problems.push(
      "the Deployment does not spread its replicas over nodes (a topologySpreadConstraint on kubernetes.io/hostname, maxSkew 1, picking its pods)"
    )
  }
  // A bare name is pulled from whatever registry the node's runtime defaults to, or not at all.
  const registry = (container.image ?? "").split("/")[0]!
  if (
    !(container.image ?? "").includes("/") ||
    !(registry.includes(".") || registry.includes(":") || registry === "localhost")
  ) {
    problems.push(`the image ${container.image} is not registry-qualified (registry.example.com/petstore:1.0.0)`)
  }

  // The container's environment as Kubernetes gives it: a later entry of a name wins.
  const env = new Map((container.env ?? []).map((variable) => [variable.name, variable]))
  const value = (name: string) => env.get(name)?.value
  const databaseUrl = env.get("DATABASE_URL")?.valueFrom?.secretKeyRef
  const secretValues = {
    ...secret?.stringData,
    ...Object.fromEntries(Object.entries(secret?.data ?? {}).map(([key, data]) => [key, atob(data)]))
  }
  if (!databaseUrl) problems.push("DATABASE_URL is not read from a Secret")
  else if (databaseUrl.name !== secret?.metadata?.name || secretValues[databaseUrl.key] === undefined) {
    problems.push(
      `DATABASE_URL names Secret ${databaseUrl.name} key ${databaseUrl.key}, which the example Secret does not hold`
    )
  } else if (!/^postgres(ql)?:\/\//.test(secretValues[databaseUrl.key]!)) {
    problems.push("the example Secret's DATABASE_URL is not a PostgreSQL URL: the replicas must share one database")
  }

  // The stop contract: Kubernetes kills the pod at terminationGracePeriodSeconds after SIGTERM.
  for (const name of ["STOP_GRACE_SECONDS", "DRAIN_TIMEOUT_SECONDS"]) {
    if (value(name) === undefined || !Number.isFinite(Number(value(name)))) {
      problems.push(`${name} is not set to a number in the Deployment's env`)
    }
  }
  const bound = stopBound({
    STOP_GRACE_SECONDS: value("STOP_GRACE_SECONDS"),
    DRAIN_TIMEOUT_SECONDS: value("DRAIN_TIMEOUT_SECONDS")
  })
  const terminationGrace = pod.spec?.terminationGracePeriodSeconds
  if (terminationGrace === undefined || !(terminationGrace > bound)) {
    problems.push(
      `terminationGracePeriodSeconds ${terminationGrace} is not above STOP_GRACE_SECONDS + DRAIN_TIMEOUT_SECONDS + 2 = ${bound}`
    )
  }

  // Probes: on the API's port, at the paths the service serves.
  const apiPort = Number(value("PORT") ?? defaults.PORT)
  const portOf = (port: number | string | undefined) =>
    typeof port === "string" ? container.ports?.find((candidate) => candidate.name === port)?.containerPort : port
  const probes = [
    ["readinessProbe", ["/readyz"]],
    ["livenessProbe", ["/livez"]],
    ["startupProbe", ["/livez", "/readyz"]]
  ] as const
  for (const [name, paths] of probes) {
    const probe = container[name]?.httpGet
    if (!probe) problems.push(`${name} is not an HTTP GET`)
    else if (!(paths as ReadonlyArray<string>).includes(probe.path ?? "") || portOf(probe.port) !== apiPort) {
      problems.push(
        `${name} asks ${probe.path} on port ${probe.port}, where ${paths.join(" or ")} on ${apiPort} (PORT) is expected`
      )
    }
  }
  if (!container.ports?.some((port) => port.containerPort === apiPort)) {
    problems.push(`the container does not declare port ${apiPort} (PORT)`)
  }
  // /readyz answers within 1 s whatever the database does; a probe giving up sooner fails a healthy pod.
  if (!((container.readinessProbe?.timeoutSeconds ?? 1) > 1)) {
    problems.push("readinessProbe's timeoutSeconds is not above 1 s, /readyz's own bound")
  }
  // A start waits for PostgreSQL up to DATABASE_START_TIMEOUT_SECONDS; the startup probe must not kill it sooner.
  const startWindow = (container.startupProbe?.periodSeconds ?? 10) * (container.startupProbe?.failureThreshold ?? 3)
  const startTimeout = Number(value("DATABASE_START_TIMEOUT_SECONDS") ?? defaults.DATABASE_START_TIMEOUT_SECONDS)
  if (!(startWindow > startTimeout)) {
    problems.push(
      `startupProbe gives a start ${startWindow} s, not above DATABASE_START_TIMEOUT_SECONDS (${startTimeout})`
    )
  }

  // Not root, nothing written in the image, /tmp writable.
  const podSecurity = pod.spec?.securityContext
  const security = container.securityContext
  if ((security?.runAsNonRoot ?? podSecurity?.runAsNonRoot) !== true) problems.push("runAsNonRoot is not true")
  if ((security?.runAsUser ?? podSecurity?.runAsUser) === 0) problems.push("runAsUser is 0 (root)")
  if (security?.readOnlyRootFilesystem !== true) problems.push("readOnlyRootFilesystem is not true")
  if (security?.allowPrivilegeEscalation !== false) problems.push("allowPrivilegeEscalation is not false")
  const tmp = container.volumeMounts?.find((mount) => mount.mountPath === "/tmp")
  if (!pod.spec?.volumes?.find((volume) => volume.name === tmp?.name)?.emptyDir) {
    problems.push("/tmp is not an emptyDir")
  }
  const { requests, limits } = container.resources ?? {}
  if (!requests?.cpu || !requests.memory || !limits?.memory) {
    problems.push("resources do not request CPU and memory and limit memory")
  }

  // The Service and the budget pick the Deployment's pods.
  if (service) {
    if (!selects({ matchLabels: service.spec?.selector ?? {} }, labels)) {
      problems.push("the Service's selector does not pick the Deployment's pods")
    }
    for (const port of service.spec?.ports ?? []) {
      if (portOf(port.targetPort ?? port.port) !== apiPort) {
        problems.push(`the Service's port ${port.port} goes to ${port.targetPort}, not to ${apiPort} (PORT)`)
      }
    }
  }
  if (budget) {
    if (!selects(budget.spec?.selector, labels)) {
      problems.push("the PodDisruptionBudget's selector does not pick the Deployment's pods")
    }
    const { minAvailable, maxUnavailable } = budget.spec ?? {}
    // A budget no eviction can meet blocks every node drain.
    const evictable = minAvailable !== undefined
      ? replicas - countOf(minAvailable, replicas)
      : maxUnavailable !== undefined
      ? countOf(maxUnavailable, replicas)
      : replicas
    if (evictable < 1) problems.push(`the PodDisruptionBudget lets no pod of ${replicas} be evicted`)
    // Unready pods serve nothing; a budget that waits for them blocks a drain for as long as they stay so.
    if (budget.spec?.unhealthyPodEvictionPolicy !== "AlwaysAllow") {
      problems.push(
        `the PodDisruptionBudget's unhealthyPodEvictionPolicy is ${budget.spec?.unhealthyPodEvictionPolicy}, not AlwaysAllow: unready pods would block node drains`
      )
    }
  }

  // The API's port open to all; the metrics port, which asks no key, to the monitoring namespace alone.
  if (policy) {
    if (!selects(policy.spec?.podSelector, labels)) {
      problems.push("the NetworkPolicy's podSelector does not pick the Deployment's pods")
    }
    const types = policy.spec?.policyTypes
    if (types !== undefined && !types.includes("Ingress")) problems.push("the NetworkPolicy does not govern Ingress")
    const metricsSetting = value("METRICS_PORT") ?? defaults.METRICS_PORT
    const metricsPort = metricsSetting === "off" ? undefined : Number(metricsSetting)
    const rules = policy.spec?.ingress ?? []
    const admits = (rule: (typeof rules)[number], port: number) =>
      (rule.ports ?? []).length === 0 ||
      rule.ports!.some((allowed) =>
        (allowed.protocol ?? "TCP") === "TCP" && (allowed.port === undefined || portOf(allowed.port) === port)
      )
    const fromAnywhere = (rule: (typeof rules)[number]) => (rule.from ?? []).length === 0
    if (!rules.some((rule) => admits(rule, apiPort) && fromAnywhere(rule))) {
      problems.push(`the NetworkPolicy does not let port ${apiPort} (PORT) in from anywhere`)
    }
    if (metricsPort !== undefined) {
      const metricsRules = rules.filter((rule) => admits(rule, metricsPort))
      if (metricsRules.some((rule) => fromAnywhere(rule) || rule.from!.some(beyondMonitoring))) {
        problems.push(`the NetworkPolicy lets the metrics port ${metricsPort} in from beyond the monitoring namespace`)
      }
      if (
        !metricsRules.some((rule) =>
          rule.from?.some((peer) =>
            peer.namespaceSelector !== undefined && selects(peer.namespaceSelector, namespaceNamed("monitoring"))
          )
        )
      ) {
        problems.push(`the NetworkPolicy does not let the metrics port ${metricsPort} in from the monitoring namespace`)
      }
    }
  }
  return problems
}

const kubernetesManifests = readManifests(kubernetesFolder)

/** A copy of the manifests with one object of `kind` changed. */
const changed = (kind: Kind, change: (object: any) => void): Array<Manifest> =>
  kubernetesManifests.map(({ file, object }) => {
    const copy = structuredClone(object)
    if (kindOf(copy) === kind) change(copy)
    return { file, object: copy }
  })

const containerOf = (deployment: any) => deployment.spec.template.spec.containers[0]
const envOf = (deployment: any, name: string) =>
  containerOf(deployment).env.find((variable: { name: string }) => variable.name === name)

describe("the Kubernetes manifests", () => {
  it("are valid Kubernetes objects with no unknown field, and keep the service's contracts", () => {
    expect(kubernetesManifests.map(({ object }) => kindOf(object)).sort()).toEqual(Object.keys(models).sort())
    expect(kubernetesProblems(kubernetesManifests)).toEqual([])
  })

  it.each<[string, Kind, (object: any) => void, string]>([
    ["a replica count as text", "apps/v1 Deployment", (d) => (d.spec.replicas = "2"), "must be integer"],
    [
      "a misspelt field",
      "apps/v1 Deployment",
      (d) => (containerOf(d).livenessProbe.failureTreshold = 3),
      "unknown field Deployment.spec.template.spec.containers[0].livenessProbe.failureTreshold"
    ],
    [
      "a grace period at the bound",
      "apps/v1 Deployment",
      (d) => (d.spec.template.spec.terminationGracePeriodSeconds = 17),
      "terminationGracePeriodSeconds 17 is not above"
    ],
    [
      "a longer drain",
      "apps/v1 Deployment",
      (d) => (envOf(d, "DRAIN_TIMEOUT_SECONDS").value = "30"),
      "terminationGracePeriodSeconds 30 is not above"
    ],
    [
      "the grace left to its default",
      "apps/v1 Deployment",
      (d) => (containerOf(d).env = containerOf(d).env.filter((v: { name: string }) => v.name !== "STOP_GRACE_SECONDS")),
      "STOP_GRACE_SECONDS is not set"
    ],
    [
      "DATABASE_URL written in",
      "apps/v1 Deployment",
      (d) => Object.assign(envOf(d, "DATABASE_URL"), { value: "postgres://x", valueFrom: undefined }),
      "DATABASE_URL is not read from a Secret"
    ],
    [
      "another Secret key",
      "apps/v1 Deployment",
      (d) => (envOf(d, "DATABASE_URL").valueFrom.secretKeyRef.key = "uri"),
      "which the example Secret does not hold"
    ],
    [
      "readiness on /livez",
      "apps/v1 Deployment",
      (d) => (containerOf(d).readinessProbe.httpGet.path = "/livez"),
      "readinessProbe asks /livez"
    ],
    [
      "liveness on the metrics port",
      "apps/v1 Deployment",
      (d) => (containerOf(d).livenessProbe.httpGet.port = "metrics"),
      "livenessProbe asks /livez on port metrics"
    ],
    [
      "no startup probe",
      "apps/v1 Deployment",
      (d) => delete containerOf(d).startupProbe,
      "startupProbe is not an HTTP GET"
    ],
    [
      "a short startup window",
      "apps/v1 Deployment",
      (d) => (containerOf(d).startupProbe.failureThreshold = 10),
      "startupProbe gives a start 20 s"
    ],
    [
      "a 1 s readiness timeout",
      "apps/v1 Deployment",
      (d) => delete containerOf(d).readinessProbe.timeoutSeconds,
      "readinessProbe's timeoutSeconds"
    ],
    [
      "root allowed",
      "apps/v1 Deployment",
      (d) => (d.spec.template.spec.securityContext.runAsNonRoot = false),
      "runAsNonRoot is not true"
    ],
    [
      "a writable root",
      "apps/v1 Deployment",
      (d) => (containerOf(d).securityContext.readOnlyRootFilesystem = false),
      "readOnlyRootFilesystem is not true"
    ],
    ["no /tmp", "apps/v1 Deployment", (d) => delete containerOf(d).volumeMounts, "/tmp is not an emptyDir"],
    ["no memory limit", "apps/v1 Deployment", (d) => delete containerOf(d).resources.limits, "resources do not"],
    [
      "a Service for other pods",
      "v1 Service",
      (s) => (s.spec.selector = { "app.kubernetes.io/name": "shop" }),
      "the Service's selector"
    ],
    [
      "a Service to the metrics port",
      "v1 Service",
      (s) => (s.spec.ports[0].targetPort = 9464),
      "the Service's port 80 goes to 9464"
    ],
    [
      "a budget for other pods",
      "policy/v1 PodDisruptionBudget",
      (b) => (b.spec.selector.matchLabels = { "app.kubernetes.io/name": "shop" }),
      "the PodDisruptionBudget's selector"
    ],
    [
      "a budget that blocks drains",
      "policy/v1 PodDisruptionBudget",
      (b) => (b.spec.minAvailable = 2),
      "lets no pod of 2 be evicted"
    ],
    [
      "a budget that waits for unready pods",
      "policy/v1 PodDisruptionBudget",
      (b) => delete b.spec.unhealthyPodEvictionPolicy,
      "unhealthyPodEvictionPolicy is undefined, not AlwaysAllow"
    ],
    [
      "replicas free to share a node",
      "apps/v1 Deployment",
      (d) => delete d.spec.template.spec.topologySpreadConstraints,
      "does not spread its replicas over nodes"
    ],
    [
      "a spread over zones alone",
      "apps/v1 Deployment",
      (d) => (d.spec.template.spec.topologySpreadConstraints[0].topologyKey = "topology.kubernetes.io/zone"),
      "does not spread its replicas over nodes"
    ],
    [
      "a spread of other pods",
      "apps/v1 Deployment",
      (
        d
      ) => (d.spec.template.spec.topologySpreadConstraints[0].labelSelector.matchLabels = {
        "app.kubernetes.io/name": "shop"
      }),
      "does not spread its replicas over nodes"
    ],
    [
      "a bare image name",
      "apps/v1 Deployment",
      (d) => (containerOf(d).image = "petstore:1.0.0"),
      "the image petstore:1.0.0 is not registry-qualified"
    ],
    [
      "an image under a Docker Hub user",
      "apps/v1 Deployment",
      (d) => (containerOf(d).image = "someone/petstore:1.0.0"),
      "is not registry-qualified"
    ],
    [
      "a policy for other pods",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => (p.spec.podSelector.matchLabels = { "app.kubernetes.io/name": "shop" }),
      "the NetworkPolicy's podSelector"
    ],
    [
      "a policy of egress alone",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => (p.spec.policyTypes = ["Egress"]),
      "does not govern Ingress"
    ],
    [
      "the API's port kept to monitoring",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => (p.spec.ingress[0].from = p.spec.ingress[1].from),
      "does not let port 3000 (PORT) in from anywhere"
    ],
    [
      "metrics from anywhere",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => delete p.spec.ingress[1].from,
      "lets the metrics port 9464 in from beyond the monitoring namespace"
    ],
    [
      "metrics from every namespace",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => (p.spec.ingress[1].from = [{ namespaceSelector: {} }]),
      "lets the metrics port 9464 in from beyond"
    ],
    [
      "metrics from the pods' own namespace",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => (p.spec.ingress[1].from = [{ podSelector: {} }]),
      "lets the metrics port 9464 in from beyond"
    ],
    [
      "metrics from an address block",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => p.spec.ingress[1].from.push({ ipBlock: { cidr: "0.0.0.0/0" } }),
      "lets the metrics port 9464 in from beyond"
    ],
    [
      "every port from anywhere",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => delete p.spec.ingress[0].ports,
      "lets the metrics port 9464 in from beyond"
    ],
    [
      "no way in for Prometheus",
      "networking.k8s.io/v1 NetworkPolicy",
      (p) => p.spec.ingress.pop(),
      "does not let the metrics port 9464 in from the monitoring namespace"
    ],
    [
      "a monitoring namespace of another name",
      "networking.k8s.io/v1 NetworkPolicy",
      (
        p
      ) => (p.spec.ingress[1].from[0].namespaceSelector.matchLabels = { "kubernetes.io/metadata.name": "prometheus" }),
      "does not let the metrics port 9464 in from the monitoring namespace"
    ]
  ])("find %s", (_name, kind, change, problem) => {
    expect(kubernetesProblems(changed(kind, change)).join("\n")).toContain(problem)
  })

  it("name the image the deployment page says the Containerfile makes", () => {
    const docs = readFileSync(join(root, "docs", "deployment.md"), "utf8")
    expect(docs).toContain("\n## Kubernetes\n")
    const section = docs.slice(docs.indexOf("\n## Kubernetes\n"))
    const deployment = kubernetesManifests.find(({ object }) => object.kind === "Deployment")!
      .object as unknown as IDeployment
    const image = deployment.spec!.template.spec!.containers[0]!.image!
    expect(section).toContain(`podman build -f Containerfile -t ${image} .`)
  })
})

// systemd ---------------------------------------------------------------------------------------

type Unit = ReadonlyMap<string, ReadonlyArray<string>>

/** A unit file's settings as `Section.Key` to its values in order (a repeated key adds one). */
const parseUnit = (text: string): Unit => {
  const settings = new Map<string, Array<string>>()
  let section = ""
  for (const line of text.replace(/\\\n/g, " ").split("\n").map((l) => l.trim())) {
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header) {
      section = header[1]!
      continue
    }
    const at = line.indexOf("=")
    const key = `${section}.${line.slice(0, at).trim()}`
    settings.set(key, [...(settings.get(key) ?? []), line.slice(at + 1).trim()])
  }
  return settings
}

/** An environment file's variables (`KEY=value`, quotes removed), as systemd reads it. */
const parseEnvFile = (text: string): Record<string, string> =>
  Object.fromEntries(
    text.split("\n").map((line) => line.trim()).filter((line) =>
      line !== "" && !line.startsWith("#") && !line.startsWith(";")
    )
      .map((line) => {
        const at = line.indexOf("=")
        return [line.slice(0, at).trim(), line.slice(at + 1).trim().replace(/^(["'])(.*)\1$/, "$2")]
      })
  )

/** The variables of `Environment=` lines (`A=1 "B=two words"`). */
const unitEnvironment = (values: ReadonlyArray<string>): Record<string, string> =>
  Object.fromEntries(
    values.flatMap((value) => [...value.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!))
      .map((
        assignment
      ) => [assignment.slice(0, assignment.indexOf("=")), assignment.slice(assignment.indexOf("=") + 1)])
  )

/** A systemd time span in seconds (`30`, `30s`, `1min 30s`, `500ms`); Infinity for `infinity`. */
const seconds = (span: string) => {
  if (span.trim() === "infinity") return Infinity
  const units: Record<string, number> = {
    "": 1,
    us: 1e-6,
    ms: 1e-3,
    s: 1,
    sec: 1,
    second: 1,
    seconds: 1,
    m: 60,
    min: 60,
    minute: 60,
    minutes: 60,
    h: 3600,
    hr: 3600,
    hour: 3600,
    hours: 3600
  }
  const parts = [...span.matchAll(/(\d+(?:\.\d+)?)\s*([a-z]*)/g)]
  if (parts.length === 0 || parts.some(([, , unit]) => units[unit!] === undefined)) return NaN
  return parts.reduce((total, [, n, unit]) => total + Number(n) * units[unit!]!, 0)
}

const last = (unit: Unit, key: string) => unit.get(key)?.at(-1)
const isTrue = (value: string | undefined) => value !== undefined && /^(1|yes|true|on)$/i.test(value)

/** Whether a systemd limit is a bound: a number, a size (`512M`, `2G`) or a share (`50%`), not `infinity`. */
const isBound = (value: string | undefined) =>
  value !== undefined && value !== "infinity" && /^\d+(\.\d+)?[KMGT%]?$/.test(value)

/**
 * What is wrong with the unit, its environment file and the database URL it loads as a credential
 * (as the service reads the file: without its last newline): each problem a line; none when they are right.
 */
const unitProblems = (unitText: string, envText: string, credentialText: string): Array<string> => {
  const problems: Array<string> = []
  const unit = parseUnit(unitText)
  const environmentFiles = (unit.get("Service.EnvironmentFile") ?? []).map((file) => file.replace(/^-/, ""))
  if (!environmentFiles.some((file) => basename(file) === basename(envFile))) {
    problems.push(`EnvironmentFile does not name ${basename(envFile)}`)
  }
  // The environment file's variables win over Environment= lines.
  const env = { ...unitEnvironment(unit.get("Service.Environment") ?? []), ...parseEnvFile(envText) }

  // The database URL, which may hold a password, from a credential: never in the environment, which every child process inherits.
  if (env.DATABASE_URL !== undefined) {
    problems.push("DATABASE_URL is set in the environment, which every child process inherits: load it as a credential")
  }
  const credentials = new Map(
    (unit.get("Service.LoadCredential") ?? []).map((
      value
    ) => [value.split(":")[0]!, value.slice(value.indexOf(":") + 1)])
  )
  const credential = /^%d\/(.+)$/.exec(env.DATABASE_URL_FILE ?? "")?.[1]
  if (credential === undefined || !credentials.has(credential)) {
    problems.push(
      `DATABASE_URL_FILE ${env.DATABASE_URL_FILE} is not %d/NAME of a credential the unit loads (LoadCredential=NAME:PATH)`
    )
  } else if (basename(credentials.get(credential)!) !== basename(credentialFile)) {
    problems.push(
      `the credential ${credential} is loaded from ${credentials.get(credential)}, not the ${
        basename(credentialFile)
      } installed beside the unit`
    )
  }
  // Whatever a leak does, it ends in a restart, not in the machine's memory or tasks.
  for (const setting of ["MemoryMax", "TasksMax"]) {
    if (!isBound(last(unit, `Service.${setting}`))) {
      problems.push(`${setting} is ${last(unit, `Service.${setting}`)}, not a bound`)
    }
  }

  const timeoutSetting = last(unit, "Service.TimeoutStopSec") ?? last(unit, "Service.TimeoutSec")
  const timeout = seconds(timeoutSetting ?? "")
  const bound = stopBound(env)
  // infinity would leave a stuck stop running for ever: the bound is what lets systemd end it.
  if (!Number.isFinite(timeout) || !(timeout > bound)) {
    problems.push(
      `TimeoutStopSec ${timeoutSetting} is not a time above STOP_GRACE_SECONDS + DRAIN_TIMEOUT_SECONDS + 2 = ${bound}`
    )
  }
  if (last(unit, "Service.KillMode") !== "mixed") {
    problems.push(`KillMode is ${last(unit, "Service.KillMode")}, not mixed`)
  }
  if (last(unit, "Service.Restart") !== "on-failure") {
    problems.push(`Restart is ${last(unit, "Service.Restart")}, not on-failure`)
  }

  const user = last(unit, "Service.User")
  if (!isTrue(last(unit, "Service.DynamicUser")) && (user === undefined || user === "root" || user === "0")) {
    problems.push("the service runs as root")
  }
  const stateDirectory = last(unit, "Service.StateDirectory")
  const databaseUrl = credentialText.replace(/\r?\n$/, "")
  if (
    !/^postgres(ql)?:\/\//.test(databaseUrl) &&
    (!stateDirectory || !databaseUrl.replace(/^(sqlite|file):/, "").startsWith(`/var/lib/${stateDirectory}/`))
  ) {
    problems.push(
      `DATABASE_URL ${databaseUrl} is not in the unit's StateDirectory (/var/lib/${stateDirectory}), the one place it may write`
    )
  }
  for (
    const setting of [
      "NoNewPrivileges",
      "PrivateTmp",
      "ProtectHome",
      "ProtectKernelTunables",
      "ProtectKernelModules",
      "ProtectControlGroups"
    ]
  ) {
    if (!isTrue(last(unit, `Service.${setting}`))) problems.push(`${setting} is not yes`)
  }
  if (last(unit, "Service.ProtectSystem") !== "strict") problems.push("ProtectSystem is not strict")
  // Bun's JIT writes the machine code it runs.
  if (isTrue(last(unit, "Service.MemoryDenyWriteExecute"))) problems.push("MemoryDenyWriteExecute stops Bun's JIT")
  const families = (unit.get("Service.RestrictAddressFamilies") ?? []).join(" ").split(/\s+/)
  for (const family of ["AF_UNIX", "AF_INET", "AF_INET6"]) {
    // AF_UNIX: the port's claim is an abstract unix socket; the workers' metrics go over unix sockets.
    if (families.length > 0 && families[0] !== "" && !families.includes(family)) {
      problems.push(`RestrictAddressFamilies leaves out ${family}`)
    }
  }
  return problems
}

const unitText = readFileSync(unitFile, "utf8")
const envText = readFileSync(envFile, "utf8")
const credentialText = readFileSync(credentialFile, "utf8")

/** The system calls allowed by a `SystemCallFilter=` group, as `systemd-analyze syscall-filter` lists them. */
const syscallGroup = (group: string): Set<string> => {
  const listing = spawnSync("systemd-analyze", ["syscall-filter"], { encoding: "utf8" }).stdout
  const groups = new Map<string, Array<string>>()
  let current: Array<string> | undefined
  for (const line of listing.split("\n")) {
    if (line.startsWith("@")) groups.set(line.trim(), current = [])
    else if (current && line.trim() !== "" && !line.trim().startsWith("#")) current.push(line.trim())
  }
  const expand = (name: string): Array<string> =>
    (groups.get(name) ?? []).flatMap((member) => member.startsWith("@") ? expand(member) : [member])
  return new Set(expand(group))
}

/** Fails, naming the set-up command, when a command from Debian's package is not installed. */
const requireCommand = (command: string, debianPackage: string) => {
  if (spawnSync("sh", ["-c", `command -v ${command}`]).status === 0) return
  throw new Error(`${command} is not installed (Debian's ${debianPackage}): run \`${setupCommand}\` as root`)
}

describe("the systemd unit", () => {
  it("keeps the stop's bound, runs the executable unprivileged and writes only its state directory", () => {
    expect(unitProblems(unitText, envText, credentialText)).toEqual([])
  })

  it.each<[string, string, string, string, string?]>([
    [
      "a stop timeout at the bound",
      unitText.replace(/^TimeoutStopSec=.*$/m, "TimeoutStopSec=17"),
      envText,
      "TimeoutStopSec 17 is not a time above"
    ],
    [
      "no stop timeout (systemd's 90 s default left to chance)",
      unitText.replace(/^TimeoutStopSec=.*$/m, ""),
      envText,
      "TimeoutStopSec undefined"
    ],
    [
      "an unbounded stop",
      unitText.replace(/^TimeoutStopSec=.*$/m, "TimeoutStopSec=infinity"),
      envText,
      "TimeoutStopSec infinity"
    ],
    [
      "a longer drain in the environment file",
      unitText,
      envText.replace(/^DRAIN_TIMEOUT_SECONDS=.*$/m, "DRAIN_TIMEOUT_SECONDS=25"),
      "= 32"
    ],
    [
      "the grace and drain left to their defaults",
      unitText.replace(/^TimeoutStopSec=.*$/m, "TimeoutStopSec=15s"),
      envText.replace(/^(STOP_GRACE|DRAIN_TIMEOUT)_SECONDS=.*$/gm, ""),
      "TimeoutStopSec 15s is not a time above STOP_GRACE_SECONDS + DRAIN_TIMEOUT_SECONDS + 2 = 17"
    ],
    [
      "the signal sent to every process",
      unitText.replace(/^KillMode=.*$/m, "KillMode=control-group"),
      envText,
      "KillMode is control-group"
    ],
    ["no restart", unitText.replace(/^Restart=.*$/m, ""), envText, "Restart is undefined"],
    ["root", unitText.replace(/^(DynamicUser|User)=.*$/gm, ""), envText, "runs as root"],
    [
      "SQLite outside the state directory",
      unitText,
      envText,
      "DATABASE_URL /srv/petstore.db is not in the unit's StateDirectory",
      "/srv/petstore.db\n"
    ],
    [
      "the database URL in the environment file",
      unitText,
      `${envText}\nDATABASE_URL=postgres://petstore:secret@db.internal/petstore\n`,
      "DATABASE_URL is set in the environment"
    ],
    [
      "the database URL in an Environment= line",
      unitText.replace(/^Environment=DATABASE_URL_FILE=.*$/m, "Environment=DATABASE_URL=/var/lib/petstore/petstore.db"),
      envText,
      "DATABASE_URL is set in the environment"
    ],
    [
      "no credential loaded",
      unitText.replace(/^LoadCredential=.*$/m, ""),
      envText,
      "is not %d/NAME of a credential the unit loads"
    ],
    [
      "DATABASE_URL_FILE naming another credential",
      unitText.replace(/^Environment=DATABASE_URL_FILE=.*$/m, "Environment=DATABASE_URL_FILE=%d/db"),
      envText,
      "DATABASE_URL_FILE %d/db is not %d/NAME of a credential"
    ],
    [
      "DATABASE_URL_FILE outside the credentials",
      unitText.replace(
        /^Environment=DATABASE_URL_FILE=.*$/m,
        "Environment=DATABASE_URL_FILE=/etc/petstore/database-url"
      ),
      envText,
      "is not %d/NAME of a credential"
    ],
    [
      "another file as the credential",
      unitText.replace(/^LoadCredential=.*$/m, "LoadCredential=database-url:/etc/petstore/petstore.env"),
      envText,
      "not the database-url installed beside the unit"
    ],
    ["no memory bound", unitText.replace(/^MemoryMax=.*$/m, ""), envText, "MemoryMax is undefined, not a bound"],
    [
      "an unbounded memory",
      unitText.replace(/^MemoryMax=.*$/m, "MemoryMax=infinity"),
      envText,
      "MemoryMax is infinity, not a bound"
    ],
    ["no task bound", unitText.replace(/^TasksMax=.*$/m, ""), envText, "TasksMax is undefined, not a bound"],
    ["the JIT denied", `${unitText}\n[Service]\nMemoryDenyWriteExecute=yes\n`, envText, "MemoryDenyWriteExecute"],
    [
      "no unix sockets",
      unitText.replace(/^RestrictAddressFamilies=.*$/m, "RestrictAddressFamilies=AF_INET AF_INET6"),
      envText,
      "leaves out AF_UNIX"
    ],
    [
      "a writable system",
      unitText.replace(/^ProtectSystem=.*$/m, "ProtectSystem=full"),
      envText,
      "ProtectSystem is not strict"
    ]
  ])("finds %s", (_name, unit, env, problem, credential = credentialText) => {
    expect(unitProblems(unit, env, credential).join("\n")).toContain(problem)
  })

  it("passes systemd-analyze verify with the real executable where ExecStart names it", async () => {
    const executable = await builtExecutable()
    using folder = temporaryFolder()
    // A root of its own: systemd's units from this machine, this unit, and the executable at ExecStart's path.
    const system = ["/usr/lib/systemd/system", "/lib/systemd/system"].find((path) =>
      existsSync(join(path, "sysinit.target"))
    )
    if (!system) {
      throw new Error(`systemd's units are not installed (Debian's systemd): run \`${setupCommand}\` as root`)
    }
    mkdirSync(join(folder.path, "usr", "lib", "systemd"), { recursive: true })
    const copy = spawnSync("cp", ["-a", system, join(folder.path, "usr", "lib", "systemd", "system")], {
      encoding: "utf8"
    })
    expect(copy.status, copy.stderr).toBe(0)
    const execStart = last(parseUnit(unitText), "Service.ExecStart")!.replace(/^[-@:+!]+/, "").split(/\s+/)[0]!
    const placed = join(folder.path, execStart)
    mkdirSync(dirname(placed), { recursive: true })
    try {
      linkSync(executable, placed)
    } catch {
      copyFileSync(executable, placed)
    }
    const units = join(folder.path, "etc", "systemd", "system")
    mkdirSync(units, { recursive: true })
    writeFileSync(join(units, "petstore.service"), unitText)
    // The same unit with a value systemd cannot parse: verify only warns, and exits 0.
    writeFileSync(join(units, "petstore-broken.service"), unitText.replace(/^KillMode=.*$/m, "KillMode=mixd"))

    const verify = (name: string) => {
      const result = spawnSync("systemd-analyze", ["verify", `--root=${folder.path}`, name], { encoding: "utf8" })
      if (result.error) throw result.error
      const lines = `${result.stdout}${result.stderr}`.split("\n").filter((line) => line.includes("petstore"))
      return { status: result.status, lines }
    }
    expect(verify("petstore.service")).toEqual({ status: 0, lines: [] })
    expect(verify("petstore-broken.service").lines.join("\n")).toContain(
      "Failed to parse kill mode specification, ignoring: mixd"
    )

    // The exposure systemd rates from the unit's sandboxing (0 to 10, lower is better), as the deployment page gives it.
    const security = spawnSync("systemd-analyze", [
      "security",
      "--offline=true",
      `--root=${folder.path}`,
      "petstore.service"
    ], { encoding: "utf8" })
    const exposure = /Overall exposure level for petstore\.service: (\d+\.\d)/.exec(security.stdout)?.[1]
    expect(exposure, security.stdout + security.stderr).toBeDefined()
    expect(readFileSync(join(root, "docs", "deployment.md"), "utf8")).toContain(
      `systemd-analyze security\` rates its exposure ${exposure}`
    )
  }, 600_000)

  it("allows every system call the executable makes to serve, create a key and stop, with WORKERS", async () => {
    const filters = (parseUnit(unitText).get("Service.SystemCallFilter") ?? []).join(" ").split(/\s+/)
    // Groups allowed, each as systemd lists it; a `~` deny list would need another check.
    expect(filters.filter((filter) => !filter.startsWith("@"))).toEqual([])
    const allowed = new Set(filters.flatMap((group) => [...syscallGroup(group)]))
    expect(allowed.size).toBeGreaterThan(50)
    requireCommand("strace", "strace")
    const executable = await builtExecutable()
    using folder = temporaryFolder()
    const port = freePort()
    const env = {
      PATH: process.env.PATH ?? "",
      HOST: "127.0.0.1",
      PORT: String(port),
      METRICS_PORT: String(freePort()),
      // As the unit gives it: reading the credential's file is among the calls traced.
      DATABASE_URL_FILE: join(folder.path, "database-url"),
      WORKERS: "2",
      STOP_GRACE_SECONDS: "0"
    }
    writeFileSync(env.DATABASE_URL_FILE, `${join(folder.path, "petstore.db")}\n`)
    const trace = (name: string, args: ReadonlyArray<string>) =>
      Bun.spawn(["strace", "-f", "-qq", "-c", "-o", join(folder.path, `${name}.strace`), executable, ...args], {
        cwd: folder.path,
        env,
        stdout: "pipe",
        stderr: "pipe"
      })
    const server = trace("serve", [])
    try {
      await waitFor(async () => {
        if (server.exitCode !== null) {
          throw new Error(`the executable did not start: ${await new Response(server.stderr).text()}`)
        }
        return fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)
      }, { what: "the executable under strace answering /readyz", timeout: 30_000, interval: 50 })
      const keys = trace("keys", ["keys", "create", "--name", "syscalls"])
      const key = (await new Response(keys.stdout).text()).trim().split("\n").at(-1)!
      expect(await keys.exited).toBe(0)
      const created = await fetch(`http://127.0.0.1:${port}/v1/pets`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ name: "Rex", categoryId: 3, status: "available" })
      })
      expect(created.status).toBe(201)
      expect((await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { Authorization: `Bearer ${key}` } })).status)
        .toBe(200)
      expect((await fetch(`http://127.0.0.1:${env.METRICS_PORT}/metrics`)).status).toBe(200)
    } finally {
      // The stop signal goes to the service, strace's child: strace ends with it, once it has written its counts.
      const child = (() => {
        try {
          return readFileSync(`/proc/${server.pid}/task/${server.pid}/children`, "utf8").trim().split(/\s+/)[0]
        } catch {
          return undefined
        }
      })()
      if (child) process.kill(Number(child), "SIGTERM")
      else server.kill("SIGKILL")
      await server.exited
    }
    // strace exits as its child did: the stop was clean.
    expect(server.exitCode).toBe(0)
    // The database was the file's, not the default's (data/petstore.db in the working folder).
    expect(existsSync(join(folder.path, "petstore.db"))).toBe(true)
    expect(existsSync(join(folder.path, "data"))).toBe(false)
    // strace -c: a table whose last column is the call's name, between dashed lines, then the total.
    const used = ["serve", "keys"].flatMap((name) =>
      readFileSync(join(folder.path, `${name}.strace`), "utf8").split("\n").slice(2)
        .filter((line) => line.trim() !== "" && !line.startsWith("-") && !/\btotal$/.test(line))
        .map((line) => line.trim().split(/\s+/).at(-1)!)
    )
    expect(used.length).toBeGreaterThan(20)
    expect([...new Set(used)].filter((call) => !allowed.has(call)).sort()).toEqual([])
  }, 600_000)
})
