// @vitest-environment happy-dom
/** A tool of an outside MCP server (`mcp__server__tool`) shows on its line as the tool and the server. */
import { describe, expect, it, vi } from 'vitest';

vi.mock('@jupyter/web-components', () => {
  const system = { register: () => system, withPrefix: () => system };
  const stub = (): unknown => system;
  return new Proxy({ addJupyterLabThemeChangeListener: () => undefined } as Record<string, unknown>, {
    get: (target, name) => (name in target ? target[name as string] : name === 'then' ? undefined : stub),
    has: () => true
  });
});

import { TimelineModel } from '../src/timeline';
import { AgentEvent } from '../src/tokens';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';

const ctx = (): IRenderContext => ({
  rendermime: null,
  answer: () => undefined,
  openPath: () => undefined,
  code: () => undefined,
  continueRun: () => undefined,
  expandTools: () => false,
  lazy: null
});

describe('MCP tool line', () => {
  it("names the server beside the tool, our tools unchanged", () => {
    const model = new TimelineModel();
    const view = new TimelineView(model, ctx());
    document.body.appendChild(view.node);
    const events: AgentEvent[] = [
      { type: 'session', session_id: 's', run_id: 'r' },
      { type: 'tool_call', id: 'a', name: 'mcp__time__get_current_time', arguments: { timezone: 'UTC' }, step: 1 },
      { type: 'tool_result', tool_call_id: 'a', name: 'mcp__time__get_current_time', output: '{}', duration_ms: 3 },
      { type: 'tool_call', id: 'b', name: 'query_target', arguments: { name: 'M 31' }, step: 1 },
      { type: 'done', session_id: 's', run_id: 'r', reason: 'finished' }
    ];
    events.forEach((e, i) => model.apply('r', i + 1, e));
    view.flush();
    const names = [...view.node.querySelectorAll('.jp-Astro-tool-name')];
    expect(names.map(n => n.textContent)).toEqual(['get_current_time \u00b7 time', 'query_target']);
    expect(names[0].getAttribute('title')).toContain('MCP server time');
  });
});
