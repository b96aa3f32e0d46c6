package amqpcli

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/family"
)

// TestContainerChoice: --docker auto starts a container only when no broker
// is named and none answers at the default address; always and off do as
// they say; the image is --docker-image, else $LOCKPROVER_RABBITMQ_IMAGE,
// else rabbitmq.ContainerImage.
func TestContainerChoice(t *testing.T) {
	settings := func(flags map[string]string) family.Settings {
		return family.Settings{
			Flag:  func(n string) string { return flags[n] },
			Given: func(n string) bool { _, ok := flags[n]; return ok },
		}
	}
	for _, tt := range []struct {
		name      string
		flags     map[string]string
		env, envI string
		up        bool
		want      bool
		image     string
		err       string
	}{
		{name: "auto, nothing anywhere", flags: map[string]string{}, want: true, image: rabbitmq.ContainerImage},
		{name: "auto, a local broker answers", flags: map[string]string{}, up: true, want: false},
		{name: "auto, --amqp-url named", flags: map[string]string{"amqp-url": "amqp://u:p@h:5672/"}, want: false},
		{name: "auto, env named", flags: map[string]string{}, env: "amqp://u:p@h:5672/", want: false},
		{name: "always, even with a local broker", flags: map[string]string{"docker": "always"}, up: true, want: true, image: rabbitmq.ContainerImage},
		{name: "off", flags: map[string]string{"docker": "off"}, want: false},
		{name: "image from env", flags: map[string]string{}, envI: "mine:1", want: true, image: "mine:1"},
		{name: "image flag wins", flags: map[string]string{"docker-image": "flag:2"}, envI: "mine:1", want: true, image: "flag:2"},
		{name: "bad mode", flags: map[string]string{"docker": "maybe"}, err: "want auto, always or off"},
		{name: "always with a URL", flags: map[string]string{"docker": "always", "amqp-url": "amqp://u:p@h:5672/"}, err: "not with --amqp-url"},
		{name: "off with an image", flags: map[string]string{"docker": "off", "docker-image": "x:1"}, err: "not with --docker off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LOCKPROVER_AMQP_URL", tt.env)
			t.Setenv(imageEnvVar, tt.envI)
			probed := ""
			got, image, err := containerChoice(settings(tt.flags), func(u string) bool { probed = u; return tt.up })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("container = %v, want %v", got, tt.want)
			}
			if tt.want && image != tt.image {
				t.Errorf("image = %q, want %q", image, tt.image)
			}
			if probed != "" && probed != rabbitmq.DefaultURL {
				t.Errorf("probed %q, want the default broker %q", probed, rabbitmq.DefaultURL)
			}
		})
	}
}
