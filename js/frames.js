// Frames that never load weblocks. A same-origin about:blank or srcdoc iframe that a script makes runs no
// script of its own (unless the page writes one), so the polyfill never runs there, while the native API
// exists in every frame. Where the polyfill installed itself, it also installs into such a frame when
// the page reaches it: the getters `contentWindow` and `contentDocument` of iframe, frame and object
// elements install, before they return, an API of the frame's own (its own client id and engine, in this
// realm's wasm instance: js/wasm_lock_api.js) as that window's `navigator.locks`, `LockManager` and `Lock`,
// unless it has a `navigator.locks` already (it loaded weblocks itself, or has the native API). A frame
// of another origin is left alone (reading its `navigator` throws), and so is one the page reaches only
// through `window.frames`, `window[i]` or a message's `source`.
import { theGlobal } from './global_object.js';
import { installLockApi } from './lock_api.js';

const getOwnDescriptor = Object.getOwnPropertyDescriptor;

/** Install `createApiFor(window)` into each same-origin frame window without `navigator.locks` that the page reaches. */
export function installIntoFrames(createApiFor, globalObject = theGlobal) {
  const installInto = (view) => {
    let navigator;
    try {
      navigator = view.navigator;
    } catch (e) {
      return; // another origin's window
    }
    if (navigator != null && !navigator.locks) installLockApi(createApiFor(view), view);
  };
  for (const name of ['HTMLIFrameElement', 'HTMLFrameElement', 'HTMLObjectElement']) {
    const element = globalObject[name];
    if (typeof element !== 'function') continue;
    for (const property of ['contentWindow', 'contentDocument']) {
      const descriptor = getOwnDescriptor(element.prototype, property);
      if (descriptor === undefined || typeof descriptor.get !== 'function') continue;
      const get = descriptor.get;
      // An accessor named as the original (`get contentWindow`), with its attributes.
      const accessors = {
        get [property]() {
          const value = get.call(this);
          if (value !== null) installInto(property === 'contentWindow' ? value : value.defaultView);
          return value;
        },
      };
      descriptor.get = getOwnDescriptor(accessors, property).get;
      Object.defineProperty(element.prototype, property, descriptor);
    }
  }
}
