import { describe, expect, it } from "@effect/vitest"
import { copyFileSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { promtoolCheckRules, promtoolTestRules } from "./support/Prometheus.js"
import { temporaryFolder } from "./support/ServerProcess.js"

const folder = join(import.meta.dirname, "../deploy/prometheus")
const rulesFile = join(folder, "petstore-alerts.yml")
const unitTestFile = join(folder, "petstore-alerts.test.yml")

interface Rule {
  readonly alert: string
  readonly expr: string
  readonly for?: string
  readonly labels?: Record<string, string>
  readonly annotations?: Record<string, string>
}

const rulesText = readFileSync(rulesFile, "utf8")
const { groups } = Bun.YAML.parse(rulesText) as {
  groups: Array<{ readonly interval?: string; readonly rules: Array<Rule> }>
}
const rules = groups.flatMap((group) => group.rules)

/** docs/operations.md's Alerts section, up to the next section. */
const alertsSection = () => {
  const page = readFileSync(join(import.meta.dirname, "../docs/operations.md"), "utf8")
  const start = page.indexOf("\n## Alerts\n")
  return page.slice(start, page.indexOf("\n## ", start + 1))
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

/** The unit tests run against `rules` in place of the file's: promtool's exit code and what it printed. */
const unitTestsAgainst = (rules: string) => {
  using copy = temporaryFolder()
  copyFileSync(unitTestFile, join(copy.path, "petstore-alerts.test.yml"))
  writeFileSync(join(copy.path, "petstore-alerts.yml"), rules)
  return promtoolTestRules(join(copy.path, "petstore-alerts.test.yml"))
}

describe("the alerting rules (deploy/prometheus/petstore-alerts.yml)", () => {
  it("pass promtool check rules; each has a severity, a summary and a runbook that is a section of docs/operations.md's Alerts", () => {
    const check = promtoolCheckRules(rulesText)
    expect(check.exitCode, check.output).toBe(0)
    expect(check.output).toContain(`SUCCESS: ${rules.length} rules found`)
    // Tuned to a 15 s evaluation, the interval the unit tests run at.
    expect(groups.map((group) => group.interval)).toEqual(groups.map(() => "15s"))

    const headings = [...alertsSection().matchAll(/^#{3,} (.+)$/gm)].map(([, heading]) => anchorOf(heading!))
    for (const rule of rules) {
      expect(rule.labels?.severity, rule.alert).toMatch(/^(critical|warning)$/)
      expect(rule.annotations?.summary, rule.alert).toBeTruthy()
      expect(rule.annotations?.runbook, rule.alert).toBe(`docs/operations.md#${anchorOf(rule.alert)}`)
      expect(headings, rule.alert).toContain(anchorOf(rule.alert))
    }
  })

  it("fire in time and only then (promtool test rules at a 15 s evaluation): a minute's database outage within 2 minutes; nothing for 10 s or a rolling update; nothing 5 minutes after an outage, nor in the 30 after", () => {
    const unitTests = Bun.YAML.parse(readFileSync(unitTestFile, "utf8")) as { evaluation_interval: string }
    expect(unitTests.evaluation_interval).toBe("15s")
    const result = promtoolTestRules(unitTestFile)
    expect(result.exitCode, result.output).toBe(0)
    expect(result.output).toContain("SUCCESS")
  })

  // Each a tuning that misses a promise, and the unit test that catches it (promtool names the time it failed at).
  const mistuned = [
    {
      what: "the database alert at once: a 10 s outage fires it",
      from: "for: 90s",
      to: "for: 0s",
      failsAt: "45m"
    },
    {
      what:
        "the database alert as it was (a 5-minute rate above 1 a minute, for 5 minutes): a minute's outage is not reported within 2 minutes",
      from: `sum by (instance) (rate(db_client_operation_errors_total{job="petstore"}[1m])) > 0\n        for: 90s`,
      to: `sum by (instance) (rate(db_client_operation_errors_total{job="petstore"}[5m])) > 1/60\n        for: 5m`,
      failsAt: "12m"
    },
    {
      what: "the readiness alert as it was (a 2-minute rate, for 2 minutes): a rolling update fires it",
      from:
        `http_response_status_code="503"}[1m])) > 0\n          or max by (instance) (up{job="petstore"} == 0)\n        for: 3m`,
      to:
        `http_response_status_code="503"}[2m])) > 0\n          or max by (instance) (up{job="petstore"} == 0)\n        for: 2m`,
      failsAt: "40m"
    },
    {
      what: "the slow route counting the 503s of a hung database: it fires still 5 minutes after a 10-minute outage",
      from: `http_route!="unmatched",http_response_status_code!~"5.."}`,
      to: `http_route!="unmatched"}`,
      failsAt: "25m"
    }
  ]
  it.each(mistuned)("fail the unit tests when mistuned: $what", ({ failsAt, from, to }) => {
    expect(rulesText).toContain(from)
    const result = unitTestsAgainst(rulesText.replace(from, to))
    expect(result.exitCode, result.output).toBe(1)
    expect(result.output).toContain(`time: ${failsAt},`)
  })
})
