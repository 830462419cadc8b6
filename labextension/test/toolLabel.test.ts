import { describe, expect, it } from 'vitest';

import { toolLabel } from '../src/timelineItems';

describe('toolLabel', () => {
  it("names the MCP server of an outside server's tool", () => {
    expect(toolLabel('mcp__time__get_current_time')).toEqual({ tool: 'get_current_time', server: 'time' });
    expect(toolLabel('mcp__ads-scix_2__search__deep')).toEqual({ tool: 'search__deep', server: 'ads-scix_2' });
  });

  it('leaves our own tools and malformed names alone', () => {
    expect(toolLabel('search_papers')).toEqual({ tool: 'search_papers', server: '' });
    expect(toolLabel('mcp__only')).toEqual({ tool: 'mcp__only', server: '' });
    expect(toolLabel('mcp____x')).toEqual({ tool: 'mcp____x', server: '' });
  });
});
