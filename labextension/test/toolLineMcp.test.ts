// @vitest-environment happy-dom
/** A tool of an outside MCP server (`mcp__server__tool`) shows on its line as the tool and the server. */
import { describe, expect, it } from 'vitest';

import { TimelineModel } from '../src/timeline';
import { AgentEvent } from '../src/tokens';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { renderContext } from './support';

const ctx = (): IRenderContext => renderContext();

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
