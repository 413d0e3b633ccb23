// agentmail approval gate for pi (docs/platforms.md, "pi").
//
// pi has no hook command and no permission prompt of its own: this extension is
// the gate. Before every tool call that can change the machine (everything but
// pi's read-only tools) it runs `agentmail hook pi` with the call as JSON on stdin
// and lets the tool run only on an explicit {"decision":"allow"}. Anything else
// blocks: a deny, an unreadable answer, a hook that cannot be started, exits with
// another status, or outlives its deadline (fail closed). "ask" (no mail session,
// no owner) is put to the person at pi's own prompt when there is one.
//
// The hook command: $AGENTMAIL_PI_HOOK (a JSON array, set by the bridge), else the
// DEFAULT_COMMAND line below (`agentmail install-hook pi` writes its own path).
import { spawn } from "node:child_process";

const DEFAULT_COMMAND: string[] = ["agentmail", "hook", "pi"];
const READ_ONLY = new Set(["read", "grep", "find", "ls"]);
const MARGIN_MS = 60_000;

function hookCommand(): string[] {
  const raw = process.env.AGENTMAIL_PI_HOOK;
  if (!raw) return DEFAULT_COMMAND;
  const parsed = JSON.parse(raw);
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((a) => typeof a === "string")) {
    throw new Error("AGENTMAIL_PI_HOOK is not a JSON array of strings");
  }
  return parsed;
}

function deadlineMs(): number {
  const seconds = Number(process.env.AGENTMAIL_HOOK_TIMEOUT || "540");
  return (Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 540_000) + MARGIN_MS;
}

type Answer = { decision: string; reason: string };

function ask(payload: object): Promise<Answer> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (answer: Answer) => {
      if (!settled) {
        settled = true;
        resolve(answer);
      }
    };
    let argv: string[];
    try {
      argv = hookCommand();
    } catch (error) {
      done({ decision: "deny", reason: `agentmail gate: ${error}; blocked` });
      return;
    }
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      done({ decision: "deny", reason: "agentmail gate: the hook did not answer in time; blocked" });
    }, deadlineMs());
    child.stdout.on("data", (data) => (out += data));
    child.stderr.on("data", (data) => (err += data));
    child.on("error", (error) => {
      clearTimeout(timer);
      done({ decision: "deny", reason: `agentmail gate: cannot start ${argv[0]} (${error.message}); blocked` });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      try {
        const answer = JSON.parse(out.trim());
        if (code === 0 && answer && typeof answer.decision === "string") {
          done({ decision: answer.decision, reason: String(answer.reason ?? "") });
          return;
        }
      } catch {}
      const why = err.trim().split("\n").slice(-3).join(" ");
      done({ decision: "deny", reason: `agentmail gate: the hook failed (exit ${code}) ${why}; blocked` });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (READ_ONLY.has(event.toolName)) return undefined;
    let sessionId: string | undefined;
    try {
      sessionId = ctx?.sessionManager?.getSessionId?.();
    } catch {}
    const answer = await ask({
      tool_name: event.toolName,
      tool_input: event.input ?? {},
      tool_use_id: event.toolCallId,
      session_id: sessionId,
      cwd: ctx?.cwd ?? process.cwd(),
    });
    if (answer.decision === "allow") return undefined;
    if (answer.decision === "ask" && ctx?.hasUI) {
      const ok = await ctx.ui.confirm("agentmail", `Allow ${event.toolName}?\n\n${answer.reason}`);
      if (ok) return undefined;
      return { block: true, reason: "Blocked at the terminal" };
    }
    return { block: true, reason: answer.reason || "blocked by the agentmail gate" };
  });
}
