// The agentmail plugin for a DSH ACP profile, written by `agentmail install-hook dsh`
// (docs/platforms.md, "DSH"). Two jobs:
// 1. In mode `workspace` (AGENTMAIL_PERMISSION_MODE, set by the bridge for each turn)
//    it answers DSH's `tools/pre-execute` gate with {kind: 'ask'} for every guarded
//    tool, so DSH sends session/request_permission and the bridge asks a human by mail.
// 2. It ends DSH when the ACP client closes stdin (DSH itself keeps running).
export const name = 'agentmail'

const GUARDED = /^(bash|shell|exec|write|edit|multi_?edit|apply_?patch|patch|create|delete|move|rename)/i

export function apply(ctx) {
  if ((process.env.AGENTMAIL_PERMISSION_MODE ?? 'workspace') === 'workspace') {
    ctx.on('tools/pre-execute', (exec, next) => {
      if (GUARDED.test(String(exec?.name ?? ''))) {
        return Promise.resolve({ kind: 'ask', reason: `agentmail: a human approves "${exec.name}"` })
      }
      return next()
    })
  }
  const end = () => {
    const exit = ctx.get('appExit')
    if (typeof exit === 'function') exit(0)
    setTimeout(() => process.exit(0), 2000).unref()
  }
  process.stdin.once('end', end)
  ctx.effect(() => () => process.stdin.off('end', end), 'agentmail.stdin')
}
