// The page's Content-Security-Policy allows <style> elements only with the
// nonce the bridge put in this response (style-src-elem). xterm.js creates
// <style> elements for its theme and layout; give every one the nonce.
// Imported first, before any library creates an element.

const meta = document.querySelector('meta[name="virtstation-style-nonce"]');
const nonce = meta ? meta.content : '';
if (meta) meta.remove();

if (nonce && /^[A-Za-z0-9+/_-]+=*$/.test(nonce)) {
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function createElement(tag, options) {
    const el = create.call(this, tag, options);
    if (typeof tag === 'string' && tag.toLowerCase() === 'style') el.nonce = nonce;
    return el;
  };
}
