// deploy/k8s/validate.mjs FILE.yaml...: each document checked against the
// Kubernetes API schemas of the kubernetes-models package (types, enums,
// required fields), and against what txbox needs of a pod (docs/deploy.md).
// Prints one line per document; exit 1 if any is wrong.
import fs from "node:fs";
import yaml from "js-yaml";

const kinds = {
  "batch/v1 Job": "kubernetes-models/batch/v1/Job",
  "apps/v1 Deployment": "kubernetes-models/apps/v1/Deployment",
  "v1 PersistentVolumeClaim": "kubernetes-models/v1/PersistentVolumeClaim",
  "v1 ConfigMap": "kubernetes-models/v1/ConfigMap",
};

// what txbox needs of the pod that runs it, whatever the schema allows
// (docs/deploy.md): a container that runs txbox's sandbox (txbox mcp, agent
// or run) needs procMount Unmasked and txbox's seccomp profile; every
// container runs without privileges and with limits; the workspace, where
// the audit log lives, is on a PersistentVolumeClaim (it outlives the pod)
const SANDBOX = /\btxbox\s+(mcp|agent|run)\b/;
function txboxChecks(doc) {
  const pod = doc.spec?.template?.spec;
  if (!pod) return [];
  const bad = [];
  if (pod.hostUsers !== false) bad.push("hostUsers must be false (a user namespace per pod)");
  const podSeccomp = pod.securityContext?.seccompProfile;
  const vols = Object.fromEntries((pod.volumes ?? []).map((v) => [v.name, v]));
  let sandboxes = 0;
  for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
    const s = c.securityContext ?? {};
    if (s.privileged) bad.push(`${c.name}: privileged`);
    if (s.allowPrivilegeEscalation !== false) bad.push(`${c.name}: allowPrivilegeEscalation must be false`);
    if (!(s.capabilities?.drop ?? []).includes("ALL")) bad.push(`${c.name}: capabilities must drop ALL`);
    if ((s.capabilities?.add ?? []).length) bad.push(`${c.name}: adds capabilities`);
    if (!c.resources?.limits?.memory || !c.resources?.limits?.cpu) bad.push(`${c.name}: cpu and memory limits`);
    const ws = (c.volumeMounts ?? []).find((m) => m.mountPath === "/work");
    const runs = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
    if (SANDBOX.test(runs)) {
      sandboxes++;
      const prof = s.seccompProfile ?? podSeccomp;
      if (prof?.type !== "Localhost" || prof?.localhostProfile !== "txbox/seccomp.json")
        bad.push(`${c.name}: seccompProfile must be Localhost txbox/seccomp.json`);
      if (s.procMount !== "Unmasked") bad.push(`${c.name}: procMount must be Unmasked`);
      if (!ws) bad.push(`${c.name}: no workspace volume at /work`);
      else if (!vols[ws.name]?.persistentVolumeClaim)
        bad.push(`${c.name}: the workspace (and its audit log) must be on a persistentVolumeClaim`);
    } else if (s.procMount === "Unmasked") {
      bad.push(`${c.name}: runs no sandbox, so needs no procMount Unmasked`);
    }
  }
  if (!sandboxes) bad.push("no container runs txbox's sandbox");
  return bad;
}

let failed = 0;
for (const file of process.argv.slice(2)) {
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
  } catch (e) {
    console.log(`FAIL ${file}: ${e.message.split("\n")[0]}`);
    failed++;
    continue;
  }
  for (const doc of docs) {
    if (!doc) continue;
    const key = `${doc.apiVersion} ${doc.kind}`;
    const name = `${file}: ${doc.kind} ${doc.metadata?.name}`;
    const mod = kinds[key];
    if (!mod) {
      console.log(`FAIL ${name}: no schema here for ${key}`);
      failed++;
      continue;
    }
    const M = Object.values(await import(mod))[0];
    const problems = [];
    try {
      new M(doc).validate();
    } catch (e) {
      for (const err of e.errors ?? [e]) problems.push(`${err.instancePath ?? ""} ${err.message}`.trim());
    }
    problems.push(...txboxChecks(doc));
    if (problems.length) {
      failed++;
      console.log(`FAIL ${name}: ${problems.join("; ")}`);
    } else {
      console.log(`ok   ${name}`);
    }
  }
}
process.exit(failed ? 1 : 0);
