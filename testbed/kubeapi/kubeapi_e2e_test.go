//go:build e2e

package kubeapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// One API server for the whole test: it is what the DRA and attribution tests rely on.
func TestServer(t *testing.T) {
	s := kubeapi.Start(t)
	ctx := context.Background()

	t.Run("serves resource.k8s.io/v1", func(t *testing.T) {
		res, err := s.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		for _, want := range []string{"resourceslices", "resourceclaims", "deviceclasses"} {
			if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
				t.Errorf("resource.k8s.io/v1 lacks %s: %v", want, names)
			}
		}
	})

	t.Run("admin creates pods without a default ServiceAccount", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a ServiceAccount token is authenticated and held to RBAC", func(t *testing.T) {
		kubeconfig := s.ServiceAccountKubeconfig(t, "team-a", "reader")
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:team-a:reader"; got != want {
			t.Errorf("authenticated as %q, want %q", got, want)
		}
		_, err = c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("listing pods without a role: %v, want Forbidden", err)
		}
		ssar, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ssar.Status.Allowed {
			t.Error("SelfSubjectAccessReview allows listing pods without a role")
		}
	})

	t.Run("restart keeps the stored objects", func(t *testing.T) {
		s.Stop()
		if _, err := s.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err == nil {
			t.Fatal("the API server answered while stopped")
		}
		start := time.Now()
		s.Restart(t)
		t.Logf("restarted in %s", time.Since(start).Round(100*time.Millisecond))
		if _, err := s.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Fatalf("pod after restart: %v", err)
		}
	})

	t.Run("paused, it answers nothing until resumed", func(t *testing.T) {
		s.Pause()
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Client.CoreV1().Pods("default").Get(short, "p", metav1.GetOptions{})
		cancel()
		s.Resume()
		if err == nil {
			t.Fatal("a paused API server answered")
		}
		if _, err := s.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Fatalf("after resume: %v", err)
		}
	})
}
