package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// reviewCacheTTL is how long an accepted token is trusted without asking
// again: short, so a revoked token stops opening sessions within seconds.
const reviewCacheTTL = 10 * time.Second

// rejectCacheTTL is shorter still: a user who just fixed a token should not
// wait, but a client hammering a bad token should not reach the API server
// on every try.
const rejectCacheTTL = 2 * time.Second

// reviewCacheSize bounds the cache by entries; each is a hash and a user.
const reviewCacheSize = 4096

// ErrUnauthenticated means the API server did not accept the token.
var ErrUnauthenticated = errors.New("the bearer token was not accepted by the Kubernetes API server")

// User is who a token belongs to, as TokenReview reported it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Authenticator checks tokens with TokenReview and caches the answers by
// the token's SHA-256. It is safe for concurrent use.
type Authenticator struct {
	reviews   authnclient.TokenReviewInterface
	audiences []string
	cache     *cache.LRUExpireCache
}

// NewAuthenticator reviews tokens through reviews; audiences, when set,
// restricts accepted tokens to those audiences.
func NewAuthenticator(reviews authnclient.TokenReviewInterface, audiences []string) *Authenticator {
	return &Authenticator{reviews: reviews, audiences: audiences, cache: cache.NewLRUExpireCache(reviewCacheSize)}
}

type reviewed struct {
	user User
	err  error
}

// Authenticate returns the token's user, or ErrUnauthenticated.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (User, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := a.cache.Get(key); ok {
		// The cache holds only reviewed; anything else is reviewed afresh.
		if r, ok := v.(reviewed); ok {
			return r.user, r.err
		}
	}
	tr, err := a.reviews.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// Not cached: the API server may be briefly unavailable.
		return User{}, fmt.Errorf("review the token: %w", err)
	}
	if !tr.Status.Authenticated {
		a.cache.Add(key, reviewed{err: ErrUnauthenticated}, rejectCacheTTL)
		return User{}, ErrUnauthenticated
	}
	u := User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(tr.Status.User.Extra))
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = v
		}
	}
	a.cache.Add(key, reviewed{user: u}, reviewCacheTTL)
	return u, nil
}
