/**
 * Giving the browser its turn during long work (a reopened history of thousands of messages):
 * the work runs in slices of about `SLICE_MS`, and `nextTask()` between them lets input,
 * rendering and other tasks run, so no main-thread task is long (Chromium reports a task over
 * 50 ms as a long task; a frame is 16 ms).
 */

/** Work per slice before giving the browser its turn. */
export const SLICE_MS = 8;

/**
 * Resolve in a new task, as soon as the browser has had its turn. Why not `setTimeout(0)`:
 * nested timeouts are clamped to 4 ms each, which a history of hundreds of slices pays every
 * slice; `scheduler.yield()` (Chromium) or a MessageChannel message is not clamped.
 */
export function nextTask(): Promise<void> {
  const scheduler = (globalThis as { scheduler?: { yield?: () => Promise<void> } }).scheduler;
  if (scheduler && typeof scheduler.yield === 'function') {
    return scheduler.yield();
  }
  if (typeof MessageChannel === 'undefined') {
    return new Promise(resolve => setTimeout(resolve, 0));
  }
  return new Promise(resolve => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}
